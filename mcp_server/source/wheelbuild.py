"""Reproducible wheel build of the engine's subdirectory, and the checks on the wheel's metadata.

The wheel is built with SOURCE_DATE_EPOCH set to the commit time, so building the same commit
again gives the same bytes (and the same sha256).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import sys
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from mcp_server.children.bound import Watch
from mcp_server.children.causes import dependency_failure
from mcp_server.children.uv import log_tail, run_logged, uv_binary, uv_refusal
from mcp_server.errors import SetupError
from mcp_server.source.profile import EngineProfile, confusable_note

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILD_TIMEOUT_S = 1800.0


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def record_hash(data: bytes) -> str:
    """The `sha256=<urlsafe-b64-nopad>` form used in RECORD files."""
    raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + raw.decode("ascii")


@dataclass(frozen=True)
class BuiltWheel:
    path: Path
    sha256: str
    backend: str


@dataclass(frozen=True)
class WheelMetadata:
    name: str
    version: str
    requires_dist: tuple[str, ...]
    provides_extra: tuple[str, ...]
    requires_python: str | None
    dist_info: str  # e.g. automl_refengine-0.1.0.dist-info
    record_text: str  # the wheel's RECORD, as bytes decoded UTF-8

    @property
    def record_digest(self) -> str:
        return hashlib.sha256(self.record_text.encode("utf-8")).hexdigest()


def build_backend(source_dir: Path) -> str:
    pyproject = source_dir / "pyproject.toml"
    if not pyproject.is_file():
        return "setuptools.build_meta:__legacy__"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SetupError(
            "build", f"pyproject.toml of the engine does not parse: {exc}", "fix it upstream"
        ) from None
    return str(data.get("build-system", {}).get("build-backend", "setuptools.build_meta"))


def build_wheel(
    source_dir: Path, out_dir: Path, commit_time: int, python: str, log_path: Path, watch: Watch
) -> BuiltWheel:
    """`uv build --wheel` with SOURCE_DATE_EPOCH; the build log goes to `log_path`; its
    fetches of build requirements are given up on under `watch`'s stall bound."""
    backend = build_backend(source_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(commit_time), PYTHONHASHSEED="0")
    env.pop("VIRTUAL_ENV", None)
    argv = [uv_binary(), "build", "--wheel", "--no-progress", "--python", python]
    argv += ["--out-dir", str(out_dir), "--", str(source_dir)]
    returncode = run_logged(
        argv, log_path, step="build", env=env, cwd=source_dir, timeout=BUILD_TIMEOUT_S, watch=watch
    )
    wheels = sorted(out_dir.glob("*.whl"))
    if returncode != 0 or len(wheels) != 1:
        tail = log_tail(log_path)
        cause = f"building the wheel failed (uv build exit {returncode}, backend {backend})"
        if dependency_failure(log_path.read_text(encoding="utf-8", errors="replace")):
            raise uv_refusal("build", log_path, cause, "")  # a build requirement from git
        if _network_failure(log_path):
            raise SetupError(
                "build",
                f"the build could not download its build dependencies (uv build exit "
                f"{returncode}, backend {backend}): a network or TLS failure, not the source",
                "check the network, proxy, certificates and package index settings "
                "(UV_INDEX_URL, SSL_CERT_FILE), then run the install again",
                details=tail,
            )
        raise SetupError(
            "build",
            cause,
            "the engine source at this commit does not build; pick another commit or branch",
            details=tail,
        )
    return BuiltWheel(wheels[0], sha256_file(wheels[0]), backend)


# uv's own words when fetching build requirements fails on the way, not in the source.
_NETWORK_FAILURE = re.compile(
    r"Failed to fetch|error sending request|dns error|failed to lookup address|"
    r"tcp connect error|Connection refused|Connection reset|timed out|\btls\b|certificate|"
    r"\bnetwork\b",
    re.IGNORECASE,
)


def _network_failure(log_path: Path) -> bool:
    """Only uv's error chain (`error:` / `cause:` lines) counts: the backend's own output may
    mention certificates or networks without the download having failed."""
    text = log_path.read_text(encoding="utf-8", errors="replace")
    chain = [line.strip() for line in text.splitlines()]
    return any(
        _NETWORK_FAILURE.search(line) for line in chain if line.startswith(("error:", "cause:"))
    )


def read_wheel_metadata(wheel: Path) -> WheelMetadata:
    step = "check"
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            dist_infos = {n.split("/", 1)[0] for n in names if ".dist-info/" in n}
            if len(dist_infos) != 1:
                raise SetupError(
                    step,
                    f"the built wheel has {len(dist_infos)} .dist-info folders, not one",
                    "the engine's build backend produced a broken wheel; fix it upstream",
                )
            dist_info = dist_infos.pop()
            metadata = zf.read(f"{dist_info}/METADATA").decode("utf-8")
            record = zf.read(f"{dist_info}/RECORD").decode("utf-8")
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as exc:
        raise SetupError(
            step,
            f"the built wheel is unreadable: {exc}",
            "the engine's build backend produced a broken wheel; fix it upstream",
        ) from None
    headers = HeaderParser().parsestr(metadata)
    return WheelMetadata(
        name=str(headers.get("Name", "")),
        version=str(headers.get("Version", "")),
        requires_dist=tuple(str(v) for v in headers.get_all("Requires-Dist") or ()),
        provides_extra=tuple(str(v) for v in headers.get_all("Provides-Extra") or ()),
        requires_python=headers.get("Requires-Python"),
        dist_info=dist_info,
        record_text=record,
    )


def check_wheel_metadata(
    meta: WheelMetadata,
    profile: EngineProfile,
    extras: list[str] | None = None,
    python_version: str | None = None,
) -> None:
    """The wheel must be the profile's distribution, at a version inside the requirement,
    provide every extra asked for (uv would only warn and install without it), and accept
    the target's Python."""
    step = "check"
    found = canonicalize_name(meta.name)
    if found != profile.canonical_distribution:
        cause = (
            f"the source builds distribution {meta.name!r}, not {profile.distribution!r}; "
            "nothing was installed"
        )
        if note := confusable_note(meta.name):
            cause += f". {note}"
        raise SetupError(
            step,
            cause,
            "check --repository/--subdirectory point at the engine core, or set --distribution",
        )
    try:
        version = Version(meta.version)
    except InvalidVersion:
        raise SetupError(
            step,
            f"the wheel's version {meta.version!r} is not a valid version",
            "fix the version the engine declares upstream",
        ) from None
    if not SpecifierSet(profile.requirement).contains(version, prereleases=True):
        raise SetupError(
            step,
            f"{meta.name} {version} does not satisfy the requirement {profile.requirement!r}; "
            "nothing was installed",
            "install a commit whose version matches, or change --requirement deliberately",
        )
    offered = {canonicalize_name(e) for e in meta.provides_extra}
    missing = [e for e in extras or [] if canonicalize_name(e) not in offered]
    if missing:
        raise SetupError(
            step,
            f"{meta.name} {version} has no extra {', '.join(map(repr, missing))} "
            f"(it provides: {', '.join(sorted(offered)) or 'none'}); nothing was installed",
            "drop the --extra or pick one the engine provides",
        )
    if (
        meta.requires_python
        and python_version
        and not SpecifierSet(meta.requires_python).contains(python_version, prereleases=True)
    ):
        raise SetupError(
            step,
            f"{meta.name} {version} requires Python {meta.requires_python}; the target "
            f"environment has Python {python_version}; nothing was installed",
            "install into an environment whose Python the engine supports",
        )
