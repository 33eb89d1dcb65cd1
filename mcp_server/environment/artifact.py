"""The wheel an install puts into the environment, and the identity it is recorded with: built
here from a commit, handed in as a reviewed wheel, or taken from the wheel store. Every one is
in the store (`wheelstore.py`) before the environment is touched, and installed from there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mcp_server.environment.records import BuildIdentity, SourceIdentity, utc_now
from mcp_server.environment.wheelstore import StoredWheel, WheelEntry, WheelStore
from mcp_server.errors import InvalidInput, SetupError
from mcp_server.source.profile import EngineProfile
from mcp_server.source.wheelbuild import (
    BuiltWheel,
    WheelMetadata,
    check_wheel_metadata,
    read_wheel_metadata,
    sha256_file,
)


@dataclass(frozen=True)
class WheelFile:
    """A wheel file as read once: its sha256 and its metadata travel with it, so neither the
    store nor the checks nor the install read it again."""

    path: Path
    sha256: str
    meta: WheelMetadata


def read_wheel(path: Path, sha256: str) -> WheelFile:
    """`path`, whose sha256 the caller computed (the build, the reviewed-wheel check), with its
    metadata read."""
    return WheelFile(path, sha256, read_wheel_metadata(path))


@dataclass(frozen=True)
class Artifact:
    """A checked wheel in the store and the identity its install records."""

    wheel: Path
    source: SourceIdentity | None  # None: a reviewed wheel
    build: BuildIdentity
    meta: WheelMetadata


def from_store(stored: StoredWheel, source: SourceIdentity | None) -> Artifact:
    """The artifact of a checked store entry no one read yet (`recreate` from the store),
    recorded with `source` (the one it was built from, as a binding knows it)."""
    return _artifact(stored, read_wheel_metadata(stored.path), source)


def _artifact(stored: StoredWheel, meta: WheelMetadata, source: SourceIdentity | None) -> Artifact:
    """`meta` is the stored wheel's: read from it, or from the file it was stored from (the
    store is content-addressed: the same sha256, the same bytes)."""
    entry = stored.entry
    build = BuildIdentity(
        distribution=meta.name,
        version=meta.version,
        wheel_filename=entry.wheel_filename,
        wheel_sha256=entry.sha256,
        record_digest=meta.record_digest,
        backend=entry.backend if source is not None else None,
    )
    return Artifact(stored.path, source, build, meta)


def store_wheel(wheel: WheelFile, source: SourceIdentity | None, backend: str | None) -> Artifact:
    """Keep `wheel` in the store and return it as the artifact to install."""
    entry = WheelEntry(
        sha256=wheel.sha256,
        wheel_filename=wheel.path.name,
        distribution=wheel.meta.name,
        version=wheel.meta.version,
        origin="source-build" if source is not None else "reviewed-wheel",
        source=source,
        backend=backend,
        time=utc_now(),
        member=None,
    )
    return _artifact(WheelStore().put(wheel.path, entry), wheel.meta, source)


def store_built(wheel: BuiltWheel, source: SourceIdentity) -> Artifact:
    """The wheel built from `source`, kept in the store."""
    return store_wheel(read_wheel(wheel.path, wheel.sha256), source, wheel.backend)


def reviewed_wheel(wheel: Path, sha256: str, profile: EngineProfile) -> Artifact:
    """`install --wheel FILE --sha256 HEX`: the file must hash to exactly the reviewed sha256
    and be the profile's distribution at a version inside its requirement, all checked before
    anything (the store included) is touched."""
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise InvalidInput(
            "check", f"{wheel} is not a wheel file (*.whl)", "pass the reviewed .whl file"
        )
    try:
        found = sha256_file(wheel)
    except OSError as exc:
        cause = f"cannot read {wheel}: {exc.strerror}"
        raise SetupError("check", cause, "check the path") from None
    if found != sha256:
        raise SetupError(
            "check",
            f"the wheel {wheel} hashes to sha256 {found}, not the reviewed {sha256}; nothing was "
            "installed",
            "install exactly the file that was reviewed, with the sha256 recorded at the review",
        )
    read = read_wheel(wheel, sha256)
    check_wheel_metadata(read.meta, profile)
    return store_wheel(read, None, None)
