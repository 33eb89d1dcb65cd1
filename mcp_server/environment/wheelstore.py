"""The content-addressed wheel store: every wheel automl-setup installs (built from a commit, or
a reviewed wheel handed in by its sha256) is kept as `<root>/wheels/<sha256>/<wheel file>` with
a sidecar `entry.json`, so the exact engine can be installed again without its repository.

An entry is written whole into a temporary directory beside the others and renamed into place
(a directory rename is atomic): of several processes storing the same wheel at once, one
rename wins and the others find the entry there and check it. Entries are read-only after the
write and every use re-hashes the wheel: altered bytes are refused, never installed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from mcp_server.environment.records import Origin, SourceIdentity
from mcp_server.errors import SetupError
from mcp_server.fsutil import fsync_path, io_failure, read_file
from mcp_server.persisted import Persisted, load_persisted
from mcp_server.source.build import sha256_file
from mcp_server.source.config import STORE_ENV, find_project_file, store_setting

SIDECAR = "entry.json"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
READ_ONLY_FILE, READ_ONLY_DIR = 0o444, 0o555


class WheelEntry(Persisted):
    """`entry.json`: what the wheel beside it is and where it came from."""

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

    def check(self, sha256: str) -> StoredWheel:
        """The entry of `sha256`, read strictly, its wheel re-hashed: a refusal naming what is
        wrong when it is damaged (the entry is left as it is, for whoever looks at it)."""
        folder = self.entry_dir(sha256)
        step = "store"
        remedy = (
            f"remove the damaged entry {folder} by hand (chmod -R u+w first); automl-setup "
            "never rewrites or deletes an entry it finds altered"
        )
        data = read_file(folder / SIDECAR)
        if data is None:
            raise SetupError(step, f"the store entry {folder} has no {SIDECAR}", remedy)
        entry = load_persisted(
            WheelEntry, data, what="wheel store entry", path=folder / SIDECAR, remedy=remedy
        )
        wheel = folder / entry.wheel_filename
        others = sorted({p.name for p in folder.iterdir()} - {SIDECAR, entry.wheel_filename})
        if entry.sha256 != sha256 or "/" in entry.wheel_filename or others:
            cause = f"the store entry {folder} holds other files than its wheel and {SIDECAR}"
            raise SetupError(step, cause, remedy, details=others)
        try:
            found = sha256_file(wheel)
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

    def find(self, sha256: str) -> StoredWheel | None:
        """The checked entry of `sha256`, None when the store has none."""
        if not self.entry_dir(sha256).exists():
            return None
        return self.check(sha256)

    def put(self, wheel: Path, entry: WheelEntry) -> StoredWheel:
        """Store `wheel` (whose sha256 is `entry.sha256`) unless it is there already; safe
        against other processes storing the same wheel at the same time."""
        existing = self.find(entry.sha256)
        if existing is not None:
            return existing
        try:
            self.wheels.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=self.wheels))
        except OSError as exc:
            raise _unwritable(self.wheels, exc) from None
        try:
            target = tmp / entry.wheel_filename
            shutil.copyfile(wheel, target)
            (tmp / SIDECAR).write_bytes(entry.model_dump_json(indent=2).encode() + b"\n")
            for path in (target, tmp / SIDECAR):
                fsync_path(path)
                path.chmod(READ_ONLY_FILE)
            if sha256_file(target) != entry.sha256:
                raise SetupError(
                    "store",
                    f"{wheel} changed while it was copied into the store",
                    "run the command again; nothing was installed",
                )
            tmp.chmod(READ_ONLY_DIR)
            try:
                tmp.rename(self.entry_dir(entry.sha256))
            except OSError as exc:
                # Another process stored the same wheel first: its entry is checked below.
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
            fsync_path(self.wheels)
        except OSError as exc:
            raise _unwritable(self.wheels, exc) from None
        finally:
            remove_tree(tmp)
        return self.check(entry.sha256)

    def remove(self, sha256: str) -> None:
        """Remove an entry: renamed out of the way first (atomically), so a reader sees it
        whole or not at all, then deleted."""
        gone = self.wheels / f".gc-{os.getpid()}-{sha256}"
        try:
            self.entry_dir(sha256).rename(gone)
        except OSError as exc:
            raise io_failure("remove", self.entry_dir(sha256), exc) from None
        remove_tree(gone)


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
