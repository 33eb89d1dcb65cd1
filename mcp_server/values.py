"""Validated value types: every rule for an untrusted string, once, for every face.

Each type is a `str` subclass whose constructor checks (and normalises) its input and raises
`InvalidInput` (exit 2) with step, cause and remedy otherwise. An instance is the proof that the
rule held: faces construct them at their edge, and the core takes them typed and never checks
them again. They are also pydantic field types (validated through the same constructor).

`RepositoryUrl` is special: its text is the URL with credentials stripped (what records hold and
messages show), and the credential is kept aside for git alone (`with_credentials`).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema
from typing_extensions import Self

from mcp_server.errors import Arg, InvalidInput, Remedy, shown
from mcp_server.fsutil.realpath import real_path
from mcp_server.redact import redact_text, strip_credentials
from mcp_server.scratch import scratch_dir

MAX_BRANCH_LENGTH = 200
MAX_URL_LENGTH = 2048
MAX_SUBDIRECTORY_LENGTH = 400
MAX_ID_LENGTH = 64
MAX_CURSOR_LENGTH = 512
MAX_PATH_LENGTH = 4096
ALLOWED_SCHEMES = ("https", "ssh", "file")
GIT_CHECK_TIMEOUT_S = 120.0

# scp-style ssh: user@host:path (a user is required so `host:path` is never a local path).
SCP_URL = re.compile(r"^(?P<user>[A-Za-z0-9._-]+)@(?P<host>[A-Za-z0-9.-]+):(?P<path>[^\s]+)$")
_FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_EXTRA = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

URL_REMEDY = "use https://host/org/repo, ssh://host/repo, git@host:org/repo or file:///path"
SUBDIRECTORY_REMEDY = "pass a relative path inside the repository, e.g. packages/automl-core"


def has_control(value: str) -> bool:
    return bool(_CONTROL.search(value))


class _Value(str):
    """A checked string. Subclasses implement `_check(raw) -> normalised text`."""

    def __new__(cls, raw: str) -> Self:
        if isinstance(raw, cls) and type(raw) is cls:  # already checked
            return raw
        if not isinstance(raw, str):
            raise InvalidInput(
                f"validate {cls._what()}",
                f"expected text for the {cls._what()}, got {type(raw).__name__}",
                "pass it as a string",
            )
        return super().__new__(cls, cls._check(raw))

    @classmethod
    def _check(cls, raw: str) -> str:
        raise NotImplementedError

    @classmethod
    def _what(cls) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", " ", cls.__name__).lower()

    @classmethod
    def __get_pydantic_core_schema__(
        cls, _source: Any, _handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(
            cls,
            core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


# --------------------------------------------------------------------------------------------
# Source values


class BranchName(_Value):
    """A short branch name that `git check-ref-format --branch` prints back unchanged."""

    @classmethod
    def _check(cls, raw: str) -> str:
        step = "validate branch"
        again = "pass the branch name exactly as `git branch -r` shows it"
        if not raw:
            remedy: Remedy = ["give ", Arg("branch", "main"), " or another name"]
            raise InvalidInput(step, "the branch name is empty", remedy)
        if len(raw) > MAX_BRANCH_LENGTH:
            cause = f"branch name longer than {MAX_BRANCH_LENGTH} characters"
            raise InvalidInput(step, cause, again)
        if has_control(raw):
            cause = "the branch name contains a control character (newline, NUL, …)"
            raise InvalidInput(step, cause, again)
        quoted = shown(raw, 100)
        if raw.startswith("-"):
            cause = f"branch name {quoted} starts with '-'"
            raise InvalidInput(step, cause, "branch names never start with '-'")
        if raw == "HEAD" or raw.startswith("refs/"):
            remedy = "give the short branch name, e.g. main or dev/feature"
            raise InvalidInput(step, f"{quoted} is not a branch name", remedy)
        if not _check_ref_format(raw):
            raise InvalidInput(
                step,
                f"{quoted} is not a valid branch name (git check-ref-format --branch refuses it)",
                "use the branch name exactly as `git branch -r` shows it, without 'origin/'",
            )
        return raw


def _check_ref_format(name: str) -> bool:
    from mcp_server.children.run import run_captured  # every command imports the values

    # Run in an empty directory with discovery fenced off, so `@{-1}` and friends can never be
    # expanded against some repository that happens to contain the working directory.
    with scratch_dir("automl-setup-ref-") as empty:
        env = {"GIT_CEILING_DIRECTORIES": str(empty.parent), "GIT_DIR": "/nonexistent"}
        try:
            proc = run_captured(
                ["git", "check-ref-format", "--branch", name],
                timeout=GIT_CHECK_TIMEOUT_S,
                env={**os.environ, "LC_ALL": "C", **env},
                cwd=empty,
            )
        except subprocess.TimeoutExpired:
            return False
    return proc.returncode == 0 and proc.stdout.removesuffix("\n") == name


class CommitId(_Value):
    """A full commit id (40 or 64 hex digits, lowered); abbreviations and revision syntax are
    refused: they can name another object later."""

    @classmethod
    def _check(cls, raw: str) -> str:
        value = raw.strip().lower()
        if not _FULL_SHA.fullmatch(value):
            cause = f"{shown(raw, 70)} is not a full commit id (40 hex digits)"
            remedy = "pass the full commit as printed by `automl-setup resolve`"
            raise InvalidInput("validate commit", cause, remedy)
        return value


class WheelSha256(_Value):
    """The sha256 of a reviewed wheel: 64 hex digits, lowered."""

    @classmethod
    def _check(cls, raw: str) -> str:
        value = raw.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{64}", value):
            cause = f"{shown(raw, 70)} is not a sha256 (64 hex digits)"
            remedy = "pass the sha256 recorded when the wheel was reviewed (`sha256sum FILE`)"
            raise InvalidInput("validate sha256", cause, remedy)
        return value


class ExtraName(_Value):
    """An extra of the engine distribution; it is spliced into the requirement given to uv."""

    @classmethod
    def _check(cls, raw: str) -> str:
        if not _EXTRA.fullmatch(raw):
            raise InvalidInput(
                "validate extra",
                f"{shown(raw, 70)} is not a valid extra name",
                "use the extra's name as the engine declares it (letters, digits, '.', '_', '-')",
            )
        return raw


class RepositoryUrl(_Value):
    """https://, ssh://, file:// or scp-style user@host:path; nothing else reaches git.

    The text (str, repr, pydantic serialisation) is the URL with credentials stripped; the
    URL as given, credential included, is `with_credentials`, for git's configuration only."""

    with_credentials: str

    def __new__(cls, raw: str) -> Self:
        if isinstance(raw, cls) and type(raw) is cls:
            return raw
        value = super().__new__(cls, raw)
        value.with_credentials = raw
        return value

    @classmethod
    def _check(cls, raw: str) -> str:
        _check_url(raw)
        return strip_credentials(raw)


def _check_url(url: str) -> None:
    step = "validate repository"
    schemes = f"use one of: {', '.join(s + '://' for s in ALLOWED_SCHEMES)} or git@host:path"
    if not url:
        raise InvalidInput(step, "the repository URL is empty", URL_REMEDY)
    url_shown = shown(redact_text(url), 100)
    if len(url) > MAX_URL_LENGTH or has_control(url) or any(c.isspace() for c in url):
        raise InvalidInput(
            step,
            "the repository URL is too long or contains whitespace or a control character",
            "percent-encode spaces in a file:// URL (%20); other URLs never contain them",
        )
    if url.startswith("-"):
        raise InvalidInput(step, f"repository URL {url_shown} starts with '-'", URL_REMEDY)
    if "::" in url.split("/", 1)[0] or url.lower().startswith("ext:"):
        transport = shown(redact_text(url).split("::", 1)[0])
        raise InvalidInput(step, f"transport {transport} is not allowed", schemes)
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme not in ALLOWED_SCHEMES:
            raise InvalidInput(step, f"scheme {shown(parts.scheme)} is not allowed", schemes)
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
                cause = "a file:// URL needs an absolute path"
                raise InvalidInput(step, cause, "write it as file:///path")
        elif not parts.hostname or parts.hostname.startswith("-"):
            raise InvalidInput(step, f"repository URL {url_shown} has no valid host", URL_REMEDY)
        return
    match = SCP_URL.fullmatch(url)
    if match is None or match["host"].startswith("-") or match["path"].startswith("-"):
        raise InvalidInput(step, f"{url_shown} is not an allowed repository URL", URL_REMEDY)


class Subdirectory(_Value):
    """A relative POSIX path inside the repository ('.' is the root): no '..', not absolute,
    no backslash or colon, no control characters; '.' components are dropped."""

    @classmethod
    def _check(cls, raw: str) -> str:
        step = "validate subdirectory"
        if not raw:
            raise InvalidInput(step, "the subdirectory is empty", "use '.' for the repository root")
        if len(raw) > MAX_SUBDIRECTORY_LENGTH or has_control(raw):
            cause = "the subdirectory is too long or contains a control character"
            raise InvalidInput(step, cause, SUBDIRECTORY_REMEDY)
        quoted = shown(raw, 100)
        if "\\" in raw or raw.startswith(("/", "-")) or ":" in raw:
            cause = f"subdirectory {quoted} must be a relative path in the repository"
            raise InvalidInput(step, cause, "for example packages/automl-core")
        parts = [p for p in PurePosixPath(raw).parts if p != "."]
        if any(p == ".." for p in parts):
            raise InvalidInput(step, f"subdirectory {quoted} contains '..'", SUBDIRECTORY_REMEDY)
        return "/".join(parts) or "."


# --------------------------------------------------------------------------------------------
# Experiment values


class ExperimentId(_Value):
    """1-64 ASCII letters, digits, '-', '_', '.', not starting with '.' or '-': it becomes a
    directory name (no '/', no '..', nothing hidden or option-like)."""

    @classmethod
    def _check(cls, raw: str) -> str:
        ok = (
            0 < len(raw) <= MAX_ID_LENGTH
            and raw[0] not in ".-"
            and all(c.isascii() and (c.isalnum() or c in "-_.") for c in raw)
        )
        if not ok:
            raise InvalidInput(
                "validate experiment id",
                f"{shown(raw)} is not a valid experiment id",
                "use 1-64 letters, digits, '-', '_' or '.', not starting with '.' or '-'",
            )
        return raw


class PageCursor(_Value):
    """A listing's next_cursor, unchanged (experiments/pages.py reads what it says)."""

    @classmethod
    def _check(cls, raw: str) -> str:
        if not re.fullmatch(rf"[A-Za-z0-9_-]{{1,{MAX_CURSOR_LENGTH}}}", raw):
            remedy = "pass the next_cursor of the previous page unchanged, or none to start again"
            raise InvalidInput("validate cursor", f"{shown(raw)} is not a listing's cursor", remedy)
        return raw


class JobId(_Value):
    """A SLURM job id: decimal digits, or `<array job>_<task>`; it is passed to squeue, sacct
    and scontrol as an argument, so nothing else (no option, no list, no cluster suffix)."""

    @classmethod
    def _check(cls, raw: str) -> str:
        value = raw.strip()
        if not re.fullmatch(r"[0-9]{1,20}(?:_[0-9]{1,10})?", value):
            raise InvalidInput(
                "validate job id",
                f"{shown(raw)} is not a SLURM job id",
                "pass the number `sbatch --parsable` printed (e.g. 4242)",
            )
        return value


# --------------------------------------------------------------------------------------------
# Paths: one rule for every face (bounded, no control characters), then made absolute


class _PathValue(_Value):
    """A local path. `path` is the absolute `Path`; the text is its string."""

    step = "validate path"
    label = "path"
    remedy: Remedy = "pass a path"

    @classmethod
    def _check(cls, raw: str) -> str:
        if not raw or len(raw) > MAX_PATH_LENGTH or has_control(raw):
            cause = f"the {cls.label} is empty, too long or contains a control character"
            raise InvalidInput(cls.step, cause, cls.remedy)
        try:
            return str(cls._absolute(Path(raw).expanduser()))
        except OSError as exc:  # ELOOP: a symlink loop
            cause = f"cannot resolve the {cls.label} {shown(raw, 100)}: {exc.strerror or exc}"
            raise InvalidInput(cls.step, cause, cls.remedy) from None

    # Not Path.resolve(): whether that refuses a symlink loop depends on the Python version.
    _absolute = staticmethod(real_path)

    @property
    def path(self) -> Path:
        return Path(self)


class TargetPath(_PathValue):
    """The target environment: an interpreter or a venv directory. Made absolute but not
    resolved: a venv's `bin/python` is a symlink to its base interpreter, and which one was
    named decides which environment it is."""

    step, label = "locate environment", "environment path"
    remedy: Remedy = ("give ", Arg("python", "PATH"), " (an interpreter or a venv directory)")

    _absolute = staticmethod(lambda path: Path(path).absolute())  # made absolute, not resolved


class WorkspacePath(_PathValue):
    """The directory that holds the experiments (resolved)."""

    step, label = "validate workspace", "workspace path"
    remedy: Remedy = ("give ", Arg("workspace", "DIR"), ", the directory of the experiments")


class WheelPath(_PathValue):
    """A reviewed wheel file (resolved; hashed before it is used)."""

    step, label = "check", "wheel path"
    remedy: Remedy = ("give ", Arg("wheel", "FILE"), ", the reviewed .whl file")


class ManifestPath(_PathValue):
    """An experiment manifest file (resolved; read with its own checks when it is used)."""

    step, label = "read manifest", "manifest path"
    remedy = "pass the path of the experiment's YAML or JSON manifest"


class ReportPath(_PathValue):
    """Where an experiment report is written: an `.html` file (resolved)."""

    step, label = "validate report path", "report path"
    remedy: Remedy = ("give ", Arg("out", "FILE.html"), ", a new file in an existing directory")

    @classmethod
    def _check(cls, raw: str) -> str:
        checked = super()._check(raw)
        if not checked.endswith(".html"):
            raise InvalidInput(cls.step, f"{shown(raw, 100)} does not end in .html", cls.remedy)
        return checked


class LockPath(_PathValue):
    """Where a PEP 751 lock is written: `pylock.toml` or `pylock.<name>.toml` (resolved)."""

    step, label = "validate lock path", "lock path"
    remedy: Remedy = ("give ", Arg("out", "pylock.toml"), " (or pylock.<name>.toml)")

    @classmethod
    def _check(cls, raw: str) -> str:
        value = super()._check(raw)
        if not re.fullmatch(r"pylock(\.[A-Za-z0-9_-]+)?\.toml", Path(value).name):
            cause = f"{shown(Path(value).name)} is not a PEP 751 lock file name"
            raise InvalidInput(cls.step, cause, cls.remedy)
        return value
