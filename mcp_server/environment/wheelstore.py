"""The content-addressed wheel store: every wheel automl-setup installs (built from a commit, or
a reviewed wheel handed in by its sha256) is kept as `<root>/wheels/<sha256>/<wheel file>` with
a sidecar `entry.json`, so the exact engine can be installed again without its repository.

An entry holds an engine's wheel, or (format 2) a wheel packed from a member of an engine's
dependency closure as installed (`memberwheel.py`): a VCS dependency at the commit it resolved
to, kept at install time, so `recreate` needs neither its repository nor an index.

An entry is written whole into a temporary directory beside the others and renamed into place
(a directory rename is atomic): of several processes storing the same wheel at once, one
rename wins and the others find the entry there and check it. Entries are read-only after the
write and every use re-hashes the wheel: altered bytes are refused, never installed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name
from pydantic import Field, model_validator

from mcp_server.environment.closure import ClosureMember, DirectUrl
from mcp_server.environment.records import Origin, SourceIdentity
from mcp_server.errors import SetupError
from mcp_server.fsutil import (
    copy_new_at,
    io_failure,
    open_reader,
    read_file,
    state_dir,
    write_new_at,
)
from mcp_server.persisted import Persisted, format_version, load_persisted
from mcp_server.source.config import STORE_ENV, find_project_file, store_setting

SIDECAR = "entry.json"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
READ_ONLY_FILE, READ_ONLY_DIR = 0o444, 0o555


class WheelEntryV1(Persisted):
    """`entry.json` format 1 (engines' wheels only): what the wheel beside it is and where it
    came from."""

    schema_version: Literal[1] = 1
    sha256: str = Field(description="sha256 of the wheel file (also the entry's folder name).")
    wheel_filename: str
    distribution: str
    version: str
    origin: Origin
    source: SourceIdentity | None = Field(
        description="The source it was built from; null for a reviewed wheel."
    )
    backend: str | None = Field(description="PEP 517 build backend; null for a reviewed wheel.")
    time: str = Field(description="UTC time the entry was stored, ISO 8601.")


class PackedMember(Persisted):
    """A closure member's wheel: which installed distribution it was packed from."""

    record_sha256: str = Field(description="The member's RECORD digest (closure.py).")
    direct_url: DirectUrl | None = Field(
        description="Its PEP 610 origin, written back when the wheel is installed; null for a "
        "distribution from a package index."
    )
    environment: str = Field(description="The environment it was packed from.")


class WheelEntry(WheelEntryV1):
    schema_version: Literal[2] = 2  # type: ignore[assignment]
    origin: Literal["source-build", "reviewed-wheel", "closure-member"]  # type: ignore[assignment]
    member: PackedMember | None = Field(
        description="For a closure member's wheel, what it was packed from; null for an "
        "engine's wheel."
    )

    @model_validator(mode="after")
    def _member_has_no_source(self) -> WheelEntry:
        if (self.member is not None) != (self.origin == "closure-member"):
            raise ValueError("a closure member's entry names what it was packed from")
        if self.member is not None and (self.source is not None or self.backend is not None):
            raise ValueError("a closure member's entry has no source or backend")
        return self

    def packs(self, name: str, member: ClosureMember) -> bool:
        """Whether this entry's wheel installs exactly `member` (named `name`) again."""
        return (
            self.member is not None
            and canonicalize_name(self.distribution) == name
            and self.version == member.version
            and self.member.record_sha256 == member.record_sha256
            and _origin(self.member.direct_url) == _origin(member.direct_url)
        )


def _origin(direct: DirectUrl | None) -> dict[str, object] | None:
    # The revision a requirement named is not identity (closure.py).
    return None if direct is None else direct.model_dump(exclude={"requested_revision"})


@dataclass(frozen=True)
class StoredWheel:
    path: Path
    entry: WheelEntry


def store_root() -> Path:
    """`$AUTOML_SETUP_STORE`, else the project file's `store` (found from the working
    directory upward), else `$XDG_CACHE_HOME/automl-setup` (`~/.cache/automl-setup`)."""
    setting = store_setting(find_project_file(Path.cwd()))
    assert setting.value is not None  # the default always has one
    return Path(setting.value)


class WheelStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or store_root()
        self.wheels = self.root / "wheels"

    def entry_dir(self, sha256: str) -> Path:
        return self.wheels / sha256

    def digests(self) -> list[str]:
        """The sha256 of every entry (temporary and removed folders start with a dot)."""
        try:
            names = sorted(p.name for p in self.wheels.iterdir())
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise io_failure("read", self.wheels, exc) from None
        return [name for name in names if SHA256.match(name)]

    def _entry(self, sha256: str) -> tuple[WheelEntry, str]:
        """The sidecar of `sha256`, read strictly, and the remedy for a damaged entry."""
        folder = self.entry_dir(sha256)
        remedy = (
            f"remove the damaged entry {folder} by hand (chmod -R u+w first); automl-setup "
            "never rewrites or deletes an entry it finds altered"
        )
        data = read_file(folder / SIDECAR, edge=self.root)
        if data is None:
            raise SetupError("store", f"the store entry {folder} has no {SIDECAR}", remedy)
        what = "wheel store entry"
        if format_version(data) == 1:  # read as format 2: an engine's wheel
            old = load_persisted(
                WheelEntryV1, data, what=what, path=folder / SIDECAR, remedy=remedy
            )
            return WheelEntry(**{**old.model_dump(), "schema_version": 2, "member": None}), remedy
        return load_persisted(
            WheelEntry, data, what=what, path=folder / SIDECAR, remedy=remedy
        ), remedy

    def check(self, sha256: str) -> StoredWheel:
        """The entry of `sha256`, read strictly, its wheel re-hashed: a refusal naming what is
        wrong when it is damaged (the entry is left as it is, for whoever looks at it)."""
        entry, remedy = self._entry(sha256)
        folder, step = self.entry_dir(sha256), "store"
        wheel = folder / entry.wheel_filename
        others = sorted({p.name for p in folder.iterdir()} - {SIDECAR, entry.wheel_filename})
        if entry.sha256 != sha256 or "/" in entry.wheel_filename or others:
            cause = f"the store entry {folder} holds other files than its wheel and {SIDECAR}"
            raise SetupError(step, cause, remedy, details=others)
        try:
            found = _hash(wheel, self.root)
        except OSError as exc:
            raise SetupError(step, f"cannot read {wheel}: {exc.strerror or exc}", remedy) from None
        if found != sha256:
            raise SetupError(
                step,
                f"the wheel {wheel} in the store was altered: its bytes hash to {found}, not "
                f"{sha256}",
                remedy,
            )
        return StoredWheel(wheel, entry)

    def find_members(self, closure: dict[str, ClosureMember]) -> dict[str, StoredWheel]:
        """The checked entries of wheels packed from exactly these closure members, by name,
        in one pass over the sidecars (a wheel is hashed once it is the one; a damaged entry
        is none: `store verify` reports it)."""
        found: dict[str, StoredWheel] = {}
        for sha in self.digests():
            try:
                entry = self._entry(sha)[0]
                name = canonicalize_name(entry.distribution)
                if name not in found and name in closure and entry.packs(name, closure[name]):
                    found[name] = self.check(sha)
            except SetupError:
                continue
        return found

    def find(self, sha256: str) -> StoredWheel | None:
        """The checked entry of `sha256`, None when the store has none."""
        if not self.entry_dir(sha256).exists():
            return None
        return self.check(sha256)

    def put(self, wheel: Path, entry: WheelEntry) -> StoredWheel:
        """Store `wheel` (whose sha256 is `entry.sha256`) unless it is there already; safe
        against other processes storing the same wheel at the same time. The copy is hashed
        once, as it is made; an entry found, or another process's, is checked."""
        existing = self.find(entry.sha256)
        if existing is not None:
            return existing
        tmp = self.wheels / f".tmp-{secrets.token_hex(8)}"  # unpredictable, made exclusively
        ours = False
        try:
            with state_dir(self.wheels, step="store", create=True, edge=self.root) as wheels:
                os.mkdir(tmp.name, 0o700, dir_fd=wheels)
                try:
                    self._fill(tmp, wheel, entry)
                    os.chmod(tmp.name, READ_ONLY_DIR, dir_fd=wheels)
                    try:
                        os.rename(tmp.name, entry.sha256, src_dir_fd=wheels, dst_dir_fd=wheels)
                        ours = True
                    except OSError as exc:
                        # Another process stored the same wheel first: checked below.
                        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                            raise
                    os.fsync(wheels)
                finally:
                    remove_tree(tmp)
        except OSError as exc:
            raise _unwritable(self.wheels, exc) from None
        if ours:
            return StoredWheel(self.entry_dir(entry.sha256) / entry.wheel_filename, entry)
        return self.check(entry.sha256)

    def _fill(self, tmp: Path, wheel: Path, entry: WheelEntry) -> None:
        """The wheel and its sidecar, read-only, into the new folder `tmp`."""
        step = "store"
        with state_dir(tmp, step=step, edge=self.root) as folder:
            target = tmp / entry.wheel_filename
            copy_new_at(folder, target, wheel, step=step, mode=READ_ONLY_FILE)
            sidecar = entry.model_dump_json(indent=2).encode() + b"\n"
            write_new_at(folder, tmp / SIDECAR, sidecar, step=step, mode=READ_ONLY_FILE)
        if _hash(target, self.root) != entry.sha256:
            raise SetupError(
                step,
                f"{wheel} changed while it was copied into the store",
                "run the command again; nothing was installed",
            )

    def remove(self, sha256: str) -> None:
        """Remove an entry: renamed out of the way first (atomically), so a reader sees it
        whole or not at all, then deleted."""
        gone = self.wheels / f".gc-{os.getpid()}-{sha256}"
        try:
            self.entry_dir(sha256).rename(gone)
        except OSError as exc:
            raise io_failure("remove", self.entry_dir(sha256), exc) from None
        remove_tree(gone)


def _hash(wheel: Path, root: Path) -> str:
    """sha256 of a stored wheel, read by the state rules (never through a link)."""
    digest = hashlib.sha256()
    with open_reader(wheel, edge=root) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def remove_tree(path: Path) -> None:
    """Remove a read-only store folder of ours (missing is fine)."""
    with contextlib.suppress(FileNotFoundError):
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    shutil.rmtree(path, ignore_errors=True)


def _unwritable(where: Path, exc: OSError) -> SetupError:
    return SetupError(
        "store",
        f"cannot write the wheel store {where}: {exc.strerror or exc}; nothing was installed",
        f"make it writable, or point {STORE_ENV} at a writable folder",
    )
