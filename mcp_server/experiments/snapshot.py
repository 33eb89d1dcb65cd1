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
`$XDG_CACHE_HOME/automl-setup/status`), a folder per workspace and a file per experiment, never
in the workspace or an environment: `list` and `status` stay read-only for everything they
report on (the MCP tools are annotated so). A file is replaced by rename (never through a link,
never one another user owns); it is not fsynced, because a torn or damaged file is simply not
trusted: it is read through a strict model, and a file that does not read (or whose key
differs) means the engine is asked again. The trials automl-setup reads from the same ledger
and manifest are kept beside the answer, under the same key.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from mcp_server.errors import SetupError
from mcp_server.experiments.trials import EngineTrials
from mcp_server.fsutil import atomic_write_bytes, read_file, state_dir

CACHE_ENV = "AUTOML_SETUP_STATUS_CACHE"
MAX_SNAPSHOT_BYTES = 64 << 20  # an experiment's: ~2 KB, more with many trials
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
    experiment_id: str
    snapshot: Snapshot


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


class Snapshots:
    """The snapshots of one workspace: a folder of the cache, a file per experiment (so a
    `status` reads one small file). A snapshot that cannot be read or written only costs the
    next call its engine process."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = str(workspace)
        self.dir = cache_dir() / hashlib.sha256(self.workspace.encode()).hexdigest()[:32]

    def path(self, experiment_id: str) -> Path:
        return self.dir / f"{experiment_id}.json"  # an experiment id is a plain file name

    def get(self, experiment_id: str, key: SnapshotKey) -> Snapshot | None:
        try:
            raw = read_file(self.path(experiment_id))  # never through a link
            if raw is None or len(raw) > MAX_SNAPSHOT_BYTES:
                return None
            read = SnapshotFile.model_validate_json(raw)
        except (SetupError, ValidationError):  # unreadable, a link, damaged: not trusted
            return None
        if (read.workspace, read.experiment_id) != (self.workspace, experiment_id):
            return None
        return read.snapshot if read.snapshot.key == key else None

    def put(
        self, experiment_id: str, key: SnapshotKey, answer: dict[str, Any], trials: EngineTrials
    ) -> None:
        snapshot = Snapshot(key=key, answer=answer, trials=trials)
        data = SnapshotFile(
            schema_version=1,
            workspace=self.workspace,
            experiment_id=experiment_id,
            snapshot=snapshot,
        )
        with contextlib.suppress(SetupError):
            atomic_write_bytes(
                self.path(experiment_id), data.model_dump_json().encode(), durable=False
            )

    def found(self) -> set[str]:
        """The experiment ids that have a snapshot file."""
        try:
            with state_dir(self.dir, step="read") as dir_fd:
                names = os.listdir(dir_fd)  # noqa: PTH208 (the folder's descriptor: no link)
        except (FileNotFoundError, SetupError):
            return set()
        return {n.removesuffix(".json") for n in names if n.endswith(".json")}

    def drop(self, *experiment_ids: str) -> None:
        """Remove these snapshots (through the folder's descriptor: never a linked folder's)."""
        with (
            contextlib.suppress(FileNotFoundError, SetupError),
            state_dir(self.dir, step="write") as dir_fd,
        ):
            for experiment_id in experiment_ids:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{experiment_id}.json", dir_fd=dir_fd)

    def keep_only(self, experiment_ids: set[str]) -> None:
        """Forget the experiments a full listing no longer found."""
        self.drop(*(self.found() - experiment_ids))
