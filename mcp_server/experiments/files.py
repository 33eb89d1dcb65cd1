"""The files automl-setup keeps for an experiment, and its controller lock.

automl-setup keeps its own files beside the engine's experiment directory, in
`<workspace>/.automl-setup/<experiment_id>/`, so an engine that insists on an empty experiment
directory still starts cleanly:

    binding.json      immutable, created exclusively at launch: engine identity, manifest sha256
    attempts.jsonl    append-only: every launch, resume and refusal (fsynced)
    controller.lock   flock held by the engine process for its whole life (inherited fd)
    attempt-N.log     stdout and stderr of the engine process of attempt N
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mcp_server.errors import ExitCode, Fix, SetupError
from mcp_server.fsutil import STATE_DIR_NAME, io_failure, open_lock, open_state
from mcp_server.values import ExperimentId

SIDECAR = STATE_DIR_NAME  # the workspace's state folder


@dataclass(frozen=True)
class ExperimentFiles:
    workspace: Path
    experiment_id: ExperimentId

    # Cached: a listing asks for them a few times per experiment, and pathlib's joins add up.
    @functools.cached_property
    def engine_dir(self) -> Path:
        return self.workspace / self.experiment_id

    @functools.cached_property
    def dir(self) -> Path:
        return self.workspace / SIDECAR / self.experiment_id

    @property
    def binding(self) -> Path:
        return self.dir / "binding.json"

    @property
    def attempts(self) -> Path:
        return self.dir / "attempts.jsonl"

    @property
    def lock(self) -> Path:
        return self.dir / "controller.lock"

    def log(self, attempt: int) -> Path:
        return self.dir / f"attempt-{attempt}.log"


def require_experiment(
    files: ExperimentFiles, step: str, *, remedy: str, exit_code: ExitCode = ExitCode.REFUSED
) -> None:
    """Refuse an id no experiment of automl-setup has in this workspace (never a guess)."""
    if not files.dir.is_dir():
        raise SetupError(
            step,
            f"no experiment {files.experiment_id!r} launched by automl-setup in {files.workspace}",
            [f"{remedy} ", Fix("list", (("workspace", str(files.workspace)),))],
            exit_code=exit_code,
        )


def status_fix(files: ExperimentFiles) -> Fix:
    """The status call of this experiment, for remedies."""
    workspace = str(files.workspace)
    return Fix("status", (("experiment_id", files.experiment_id), ("workspace", workspace)))


@contextlib.contextmanager
def controller_lock(files: ExperimentFiles) -> Iterator[int]:
    """The per-experiment lock; its fd is handed to the engine process, which keeps it held
    for as long as it lives (a killed engine frees it)."""
    fd = open_lock(files.lock)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SetupError(
                "lock",
                f"another controller holds the lock of experiment {files.experiment_id}",
                ["wait for it, or check ", status_fix(files)],
            ) from None
        except OSError as exc:  # e.g. ENOLCK: a network file system without locks
            raise io_failure("lock", files.lock, exc) from None
        yield fd
    finally:
        os.close(fd)


def lock_is_held(files: ExperimentFiles) -> bool:
    try:
        fd = open_state(files.lock, os.O_RDONLY, step="lock")
    except FileNotFoundError:  # never made: no engine ever held it
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError as exc:
        raise io_failure("lock", files.lock, exc) from None
    finally:
        os.close(fd)
    return False
