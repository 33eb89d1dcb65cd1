"""Git side of a source install: input validation, branch -> commit, exact-commit fetch, subtree id.

Every value that came from a user is validated here before git sees it, and reaches git only
as one argv element after `--end-of-options` (or as a config value in a repository we created).
Git runs through GitPython with an argv list, stdin closed, and the transport allow-list also
enforced by git itself through GIT_ALLOW_PROTOCOL.
"""

from __future__ import annotations

import base64
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit, urlunsplit

import git
from git.exc import GitCommandError

from mcp_server.errors import InvalidInput, SetupError, shown
from mcp_server.redact import redact_text, strip_credentials
from mcp_server.scratch import scratch_dir

MAX_BRANCH_LENGTH = 200
MAX_URL_LENGTH = 2048
MAX_SUBDIRECTORY_LENGTH = 400
ALLOWED_SCHEMES = ("https", "ssh", "file")
# scp-style ssh: user@host:path (a user is required so `host:path` is never a local path).
_SCP_URL = re.compile(r"^(?P<user>[A-Za-z0-9._-]+)@(?P<host>[A-Za-z0-9.-]+):(?P<path>[^\s]+)$")
_FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_EXTRA = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

URL_REMEDY = "use https://host/org/repo, ssh://host/repo, git@host:org/repo or file:///path"
SUBDIRECTORY_REMEDY = "pass a relative path inside the repository, e.g. packages/automl-core"
NETWORK_TIMEOUT_S = 900.0
REMOTE = "automl-setup-source"
LOCAL_TIMEOUT_S = 120.0


def _has_control(value: str) -> bool:
    return bool(_CONTROL.search(value))


def validate_branch(name: str) -> str:
    """A branch name as `git check-ref-format --branch` accepts it, checked outside any repo."""
    step = "validate branch"
    if not isinstance(name, str) or not name:
        raise InvalidInput(step, "the branch name is empty", "pass --branch main or a branch name")
    if len(name) > MAX_BRANCH_LENGTH:
        raise InvalidInput(
            step,
            f"branch name longer than {MAX_BRANCH_LENGTH} characters",
            "pass the branch name exactly as `git branch -r` shows it",
        )
    if _has_control(name):
        raise InvalidInput(
            step,
            "the branch name contains a control character (newline, NUL, …)",
            "pass the branch name exactly as `git branch -r` shows it",
        )
    quoted = shown(name, 100)
    if name.startswith("-"):
        raise InvalidInput(
            step, f"branch name {quoted} starts with '-'", "branch names never start with '-'"
        )
    if name == "HEAD" or name.startswith("refs/"):
        raise InvalidInput(
            step,
            f"{quoted} is not a branch name",
            "give the short branch name, e.g. main or dev/feature",
        )
    if not _check_ref_format(name):
        raise InvalidInput(
            step,
            f"{quoted} is not a valid branch name (git check-ref-format --branch refuses it)",
            "use the branch name exactly as `git branch -r` shows it, without 'origin/'",
        )
    return name


def _check_ref_format(name: str) -> bool:
    # Run in an empty directory with discovery fenced off, so `@{-1}` and friends can never be
    # expanded against some repository that happens to contain the working directory.
    with scratch_dir("automl-setup-ref-") as empty:
        env = {"GIT_CEILING_DIRECTORIES": str(empty.parent), "GIT_DIR": "/nonexistent"}
        try:
            out = git.Git(empty).execute(
                ["git", "check-ref-format", "--branch", name],
                env=env,
                kill_after_timeout=LOCAL_TIMEOUT_S,
            )
        except GitCommandError:
            return False
    return out == name


def validate_commit(sha: str) -> str:
    """A full commit id (40 or 64 hex digits); abbreviations and revision syntax are refused."""
    value = sha.strip().lower() if isinstance(sha, str) else ""
    if not _FULL_SHA.fullmatch(value):
        raise InvalidInput(
            "validate commit",
            f"{shown(sha, 70)} is not a full commit id (40 hex digits)",
            "pass the full commit as printed by `automl-setup resolve`",
        )
    return value


def validate_extra(name: str) -> str:
    if not _EXTRA.fullmatch(name):
        raise InvalidInput(
            "validate extra",
            f"{shown(name, 70)} is not a valid extra name",
            "use the extra's name as the engine declares it (letters, digits, '.', '_', '-')",
        )
    return name


def validate_repository_url(url: str) -> str:
    """https://, ssh://, file:// or scp-style user@host:path; nothing else reaches git."""
    step = "validate repository"
    if not isinstance(url, str) or not url:
        raise InvalidInput(step, "the repository URL is empty", URL_REMEDY)
    url_shown = shown(redact_text(url), 100)
    if len(url) > MAX_URL_LENGTH or _has_control(url) or any(c.isspace() for c in url):
        raise InvalidInput(
            step,
            "the repository URL is too long or contains whitespace or a control character",
            "percent-encode spaces in a file:// URL (%20); other URLs never contain them",
        )
    if url.startswith("-"):
        raise InvalidInput(step, f"repository URL {url_shown} starts with '-'", URL_REMEDY)
    if "::" in url.split("/", 1)[0] or url.lower().startswith("ext:"):
        raise InvalidInput(
            step,
            f"transport {shown(redact_text(url).split('::', 1)[0])} is not allowed",
            f"use one of: {', '.join(s + '://' for s in ALLOWED_SCHEMES)} or git@host:path",
        )
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme not in ALLOWED_SCHEMES:
            raise InvalidInput(
                step,
                f"scheme {parts.scheme!r} is not allowed",
                f"use one of: {', '.join(s + '://' for s in ALLOWED_SCHEMES)} or git@host:path",
            )
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
                raise InvalidInput(
                    step, "a file:// URL needs an absolute path", "write it as file:///path"
                )
        elif not parts.hostname or parts.hostname.startswith("-"):
            raise InvalidInput(step, f"repository URL {url_shown} has no valid host", URL_REMEDY)
        return url
    match = _SCP_URL.fullmatch(url)
    if match is None or match["host"].startswith("-") or match["path"].startswith("-"):
        raise InvalidInput(
            step,
            f"{url_shown} is not an allowed repository URL",
            URL_REMEDY,
        )
    return url


def validate_subdirectory(subdirectory: str) -> str:
    """Relative POSIX path inside the repository: no '..', not absolute, no control characters."""
    step = "validate subdirectory"
    if not isinstance(subdirectory, str) or not subdirectory:
        raise InvalidInput(step, "the subdirectory is empty", "use '.' for the repository root")
    if len(subdirectory) > MAX_SUBDIRECTORY_LENGTH or _has_control(subdirectory):
        raise InvalidInput(
            step,
            "the subdirectory is too long or contains a control character",
            SUBDIRECTORY_REMEDY,
        )
    if "\\" in subdirectory or subdirectory.startswith(("/", "-")) or ":" in subdirectory:
        raise InvalidInput(
            step,
            f"subdirectory {shown(subdirectory, 100)} must be a relative path in the repository",
            "for example packages/automl-core",
        )
    parts = [p for p in PurePosixPath(subdirectory).parts if p != "."]
    if any(p == ".." for p in parts):
        raise InvalidInput(
            step, f"subdirectory {shown(subdirectory, 100)} contains '..'", SUBDIRECTORY_REMEDY
        )
    return "/".join(parts) or "."


# --------------------------------------------------------------------------------------------
# Running git


def git_environment() -> dict[str, str]:
    """Environment for every git call: transport allow-list, no prompts, no pager."""
    env = {
        "GIT_ALLOW_PROTOCOL": "file:https:ssh",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "GIT_NO_REPLACE_OBJECTS": "1",
        # Our scratch directories live in the temp dir: never discover a repository above it.
        "GIT_CEILING_DIRECTORIES": tempfile.gettempdir(),
    }
    if "GIT_SSH_COMMAND" not in os.environ:
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
    return env


def run_git(
    args: list[str],
    *,
    cwd: Path | None = None,
    step: str,
    timeout: float,
    config: dict[str, str] | None = None,
) -> str:
    """Run git with an argv list; failures become a SetupError naming the step (redacted).

    `config` reaches git through GIT_CONFIG_KEY_n/VALUE_n: values that may hold credentials
    (a repository URL) never appear on a command line other users can read."""
    argv = ["git", "-c", "protocol.ext.allow=never", "-c", "core.hooksPath=/dev/null"]
    # No background maintenance in throw-away repositories: it only costs time.
    argv += ["-c", "maintenance.auto=false", "-c", "gc.auto=0", *args]
    env = git_environment()
    for index, (key, value) in enumerate((config or {}).items()):
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
    env["GIT_CONFIG_COUNT"] = str(len(config or {}))
    try:
        return git.Git(str(cwd) if cwd else None).execute(argv, env=env, kill_after_timeout=timeout)
    except GitCommandError as exc:
        stderr = (exc.stderr or "").strip().removeprefix("stderr:").strip(" '\n")
        cause = _git_cause(stderr) or f"git exited with status {exc.status}"
        raise SetupError(step, f"git failed: {cause}", _git_remedy(step, stderr)) from None


def _git_cause(stderr: str) -> str:
    """git's own first `fatal:`/`error:` line (its last lines are generic advice)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[-1] if lines else ""


def _git_remedy(step: str, stderr: str) -> str:
    lowered = stderr.lower()
    if "not allowed" in lowered or "transport" in lowered:
        return "only https, ssh and file repositories are allowed"
    if any(s in lowered for s in ("could not read", "does not appear", "not found", "unable")):
        return "check the repository URL and your access to it (git ls-remote <url>)"
    return f"see the git message above; the {step} step changed nothing in your environment"


# --------------------------------------------------------------------------------------------
# Resolve


@dataclass(frozen=True)
class Resolution:
    repository: str  # credentials stripped
    branch: str
    ref: str
    commit: str


def git_url(url: str) -> tuple[str, str | None]:
    """The URL git is given, and the HTTP header that carries the URL's credential, if any.

    User info never reaches git inside the URL: git starts its https helper with the URL on
    the command line (`git remote-https NAME URL`), where every user's `ps` can read it. An
    https credential travels instead as an Authorization header set through the config
    environment; an ssh URL keeps its user (no secret) and loses a password (ssh never takes
    one from a URL)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    if parts.scheme == "ssh":
        return urlunsplit(parts._replace(netloc=f"{user}@{hostport}")), None
    bare = urlunsplit(parts._replace(netloc=hostport))
    basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    return bare, f"Authorization: Basic {basic}"


def _remote_config(name: str, repository: str) -> dict[str, str]:
    """Config of a remote defined only for one call, for GIT_CONFIG_KEY_n/VALUE_n."""
    url, header = git_url(repository)
    config = {f"remote.{name}.url": url}
    if header is not None:
        # Scoped to this URL: a redirect to another host does not receive it.
        config[f"http.{url}.extraHeader"] = header
    return config


def resolve_branch(repository: str, branch: str) -> Resolution:
    """Exactly refs/heads/<branch> on the remote; a missing branch is an error, never a tag."""
    validate_repository_url(repository)
    validate_branch(branch)
    ref = f"refs/heads/{branch}"
    # A named remote defined only for this call, run where no repository can be discovered.
    with scratch_dir("automl-setup-resolve-") as empty:
        out = run_git(
            ["ls-remote", "--end-of-options", REMOTE, ref, f"refs/tags/{branch}"],
            cwd=Path(empty),
            step="resolve",
            timeout=NETWORK_TIMEOUT_S,
            config=_remote_config(REMOTE, repository),
        )
    refs = dict(_parse_ls_remote(out))
    if ref not in refs:
        tag_note = (
            f" (a tag named {branch!r} exists, but tags are never installed)"
            if f"refs/tags/{branch}" in refs
            else ""
        )
        raise SetupError(
            "resolve",
            f"branch {branch!r} does not exist on {strip_credentials(repository)}{tag_note}",
            "list branches with `git ls-remote --heads <repository>`, or pin one with --commit",
        )
    return Resolution(strip_credentials(repository), branch, ref, validate_commit(refs[ref]))


def _parse_ls_remote(out: str) -> list[tuple[str, str]]:
    pairs = []
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if sha and name:
            pairs.append((name.strip(), sha.strip()))
    return pairs


# --------------------------------------------------------------------------------------------
# Fetch


@dataclass(frozen=True)
class FetchedSource:
    checkout: Path
    source_dir: Path  # the subdirectory inside checkout
    commit: str
    subtree_id: str
    commit_time: int  # seconds since the epoch (committer time)


def fetch_commit(repository: str, commit: str, subdirectory: str, dest: Path) -> FetchedSource:
    """Fetch exactly `commit` (shallow, blobless where the server allows) and check out only
    what the subdirectory needs into `dest`, which must not exist yet."""
    validate_repository_url(repository)
    commit = validate_commit(commit)
    subdirectory = validate_subdirectory(subdirectory)
    step = "fetch"
    # The remote only ever reaches git through the environment, not the scratch repository's
    # config file; its credential, as a header (see git_url).
    remote = {
        **_remote_config("origin", repository),
        "remote.origin.promisor": "true",
        "remote.origin.partialclonefilter": "blob:none",
    }

    def git_here(args: list[str], timeout: float = LOCAL_TIMEOUT_S) -> str:
        return run_git(args, cwd=dest, step=step, timeout=timeout, config=remote)

    run_git(["init", "-q", "--template=", str(dest)], step=step, timeout=LOCAL_TIMEOUT_S)
    try:
        git_here(
            [
                *("fetch", "-q", "--no-tags", "--depth=1", "--filter=blob:none"),
                *("--end-of-options", "origin", commit),
            ],
            NETWORK_TIMEOUT_S,
        )
    except SetupError as exc:
        raise SetupError(
            step,
            f"commit {commit} could not be fetched from {strip_credentials(repository)}: "
            + exc.cause.removeprefix("git failed: "),
            "check that the commit exists on the repository (it may have been force-pushed "
            "away) and that you can reach it",
        ) from None
    kind = git_here(["cat-file", "-t", commit])
    if kind != "commit":
        raise SetupError(step, f"{commit} is a {kind}, not a commit", "pass a commit id")
    subtree_id = _subtree_id(dest, commit, subdirectory)
    if subdirectory != ".":
        git_here(["sparse-checkout", "set", "--cone", "--", subdirectory])
    git_here(["checkout", "-q", "--detach", commit], NETWORK_TIMEOUT_S)  # fetches the blobs
    source_dir = _confined(dest, subdirectory)
    commit_time = int(git_here(["show", "-s", "--format=%ct", commit]))
    return FetchedSource(dest, source_dir, commit, subtree_id, commit_time)


def _subtree_id(checkout: Path, commit: str, subdirectory: str) -> str:
    """Git tree id of the subdirectory; refuses a missing path, a file, or a symlink anywhere."""
    step = "fetch"
    if subdirectory == ".":
        return run_git(
            ["rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}"],
            cwd=checkout,
            step=step,
            timeout=LOCAL_TIMEOUT_S,
        )
    parent = f"{commit}^{{tree}}"
    parts = subdirectory.split("/")
    tree_id = ""
    for depth, name in enumerate(parts):
        listing = run_git(
            ["ls-tree", "--full-tree", "--end-of-options", parent, "--", name],
            cwd=checkout,
            step=step,
            timeout=LOCAL_TIMEOUT_S,
        )
        entry = _ls_tree_entry(listing, name)
        where = "/".join(parts[: depth + 1])
        if entry is None:
            raise SetupError(
                step,
                f"subdirectory {shown(subdirectory, 100)} does not exist at commit {commit[:12]}",
                "check --subdirectory against the repository layout at that commit",
            )
        mode, kind, object_id = entry
        if mode == "120000":
            raise SetupError(
                step,
                f"{where!r} is a symbolic link; the subdirectory may not leave the repository",
                "point --subdirectory at a real directory",
            )
        if kind != "tree":
            raise SetupError(
                step,
                f"{where!r} is not a directory at commit {commit[:12]}",
                "check --subdirectory against the repository layout at that commit",
            )
        parent = tree_id = object_id
    return tree_id


def _ls_tree_entry(listing: str, name: str) -> tuple[str, str, str] | None:
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        if path == name:
            mode, kind, object_id = meta.split()
            return mode, kind, object_id
    return None


def _confined(root: Path, subdirectory: str) -> Path:
    """The checked-out subdirectory, proven to resolve inside the checkout."""
    real_root = root.resolve()
    target = (root / subdirectory).resolve()
    if target != real_root and real_root not in target.parents:
        raise SetupError(
            "fetch",
            f"subdirectory {shown(subdirectory, 100)} escapes the repository",
            SUBDIRECTORY_REMEDY,
        )
    if not target.is_dir():
        raise SetupError(
            "fetch",
            f"subdirectory {shown(subdirectory, 100)} was not checked out",
            "check --subdirectory against the repository layout at that commit",
        )
    return target
