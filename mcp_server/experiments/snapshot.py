"""Status snapshots: the engine's last `status --json` answer for an experiment, kept with
everything that answer depends on, and given again only while all of it is unchanged.

The engine answers from its build, the environment it runs from and the experiment's own files
(docs/algorithms.md: the engine contract), so the key of a snapshot is:

- the engine command (interpreter, distribution, console script) and the bound identity digest;
- the environment: the interpreter (the link and what it names), automl-setup's install record
  and every `site-packages` folder (an install or uninstall there adds or removes a folder);
- the experiment's engine directory (a file the engine replaces by rename changes it), its
  `ledger.jsonl` (appended) and `manifest.json`;

each by device, inode, size, mtime_ns and ctime_ns (ctime moves on every write, even one whose
mtime was put back). An answer is kept only when the controller lock was free before and after
the engine answered, the key did not move meanwhile, and the engine did not say `running` (a
running engine's answer is never reused: it is asked every time). A snapshot is used only while
the lock is still free.

Snapshots live in the user's cache (`$AUTOML_SETUP_STATUS_CACHE`, else
`$XDG_CACHE_HOME/automl-setup/status`), one file per workspace, never in the workspace or an
environment: `list` and `status` stay read-only for everything they report on (the MCP tools are
annotated so). The file is replaced by rename (never through a link, never one another user
owns); it is not fsynced, because a torn or damaged file is simply not trusted: it is read
through a strict model, and any file that does not read (or any entry whose key differs) means
the engine is asked again. The trials automl-setup reads from the same ledger and manifest
are kept beside the answer, under the same key.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from mcp_server.errors import SetupError
from mcp_server.experiments.trials import EngineTrials
from mcp_server.fsutil import atomic_write_bytes, read_file

CACHE_ENV = "AUTOML_SETUP_STATUS_CACHE"
MAX_SNAPSHOT_BYTES = 64 << 20  # far above a thousand experiments' (about 1 MB)
Stat = tuple[int, int, int, int, int] | None  # device, inode, size, mtime_ns, ctime_ns


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SnapshotKey(_Strict):
    command: tuple[str, str, str]  # interpreter, distribution, console script
    identity_digest: str
    environment: tuple[Stat, ...]
    engine_files: tuple[Stat, Stat, Stat]  # the experiment directory, ledger, manifest


class Snapshot(_Strict):
    key: SnapshotKey
    answer: dict[str, Any]
    trials: EngineTrials  # read from the same ledger and manifest, when the engine answered


class SnapshotFile(_Strict):
    schema_version: Literal[1]
    workspace: str
    snapshots: dict[str, Snapshot]


def stat_of(path: Path, *, follow: bool = False) -> Stat:
    try:
        st = path.stat() if follow else path.lstat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def environment_stats(prefix: Path, interpreter: Path) -> tuple[Stat, ...]:
    """What the environment is made of, for the key (see the module's docstring)."""
    packages = sorted(prefix.glob("lib/python*/site-packages"))
    return (
        stat_of(interpreter),
        stat_of(interpreter, follow=True),
        stat_of(prefix / ".automl-setup" / "engine-record.json"),
        *(stat_of(path) for path in packages),
    )


def engine_file_stats(engine_dir: Path) -> tuple[Stat, Stat, Stat]:
    return (
        stat_of(engine_dir),
        stat_of(engine_dir / "ledger.jsonl"),
        stat_of(engine_dir / "manifest.json"),
    )


def cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser().absolute()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return cache.absolute() / "automl-setup" / "status"


@dataclass
class Snapshots:
    """The snapshots of one workspace, as read; `put` and `drop` change them, `save` writes
    them back when they changed."""

    workspace: str
    path: Path
    found: dict[str, Snapshot] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def load(cls, workspace: Path) -> Snapshots:
        name = hashlib.sha256(str(workspace).encode()).hexdigest()[:32]
        snapshots = cls(str(workspace), cache_dir() / f"{name}.json")
        try:
            raw = read_file(snapshots.path)
            if raw is None or len(raw) > MAX_SNAPSHOT_BYTES:
                return snapshots
            read = SnapshotFile.model_validate_json(raw)
        except (SetupError, ValidationError):  # unreadable, a link, damaged: not trusted
            return snapshots
        if read.workspace == snapshots.workspace:
            snapshots.found = dict(read.snapshots)
        return snapshots

    def get(self, experiment_id: str, key: SnapshotKey) -> Snapshot | None:
        snapshot = self.found.get(experiment_id)
        return snapshot if snapshot is not None and snapshot.key == key else None

    def put(
        self, experiment_id: str, key: SnapshotKey, answer: dict[str, Any], trials: EngineTrials
    ) -> None:
        self.found[experiment_id] = Snapshot(key=key, answer=answer, trials=trials)
        self.changed = True

    def drop(self, experiment_id: str) -> None:
        if self.found.pop(experiment_id, None) is not None:
            self.changed = True

    def keep_only(self, experiment_ids: set[str]) -> None:
        """Forget the experiments a full listing no longer found."""
        for gone in set(self.found) - experiment_ids:
            self.drop(gone)

    def save(self) -> None:
        if not self.changed:
            return
        data = SnapshotFile(schema_version=1, workspace=self.workspace, snapshots=self.found)
        try:
            atomic_write_bytes(self.path, data.model_dump_json().encode(), durable=False)
        except SetupError:  # a cache that cannot be written only costs the next call time
            return
