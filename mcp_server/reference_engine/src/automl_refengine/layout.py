"""Where an experiment keeps its files, and the lock that admits one controller at a time.

<workspace>/<experiment_id>/
    .lock              flock held by the controller (or cancel) for its lifetime
    manifest.json      the validated manifest and its sha256, written once by run
    ledger.jsonl       append-only events (see ledger.py), the source of truth
    state.json         snapshot of the replayed ledger, replaced atomically
    best.json          the best trial so far, replaced atomically
    controller.json    pid of the live controller; removed when it exits
    cancel.json        written by cancel; makes the cancel durable
    trial-NNNNN/       params.json, stdout.log, stderr.log, the metrics file
    trial-NNNNN.prev-K/  an earlier, interrupted attempt of the same trial
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from automl_refengine.durable import atomic_write_json
from automl_refengine.errors import CorruptState, InvalidInput, Refused
from automl_refengine.manifest import Manifest, manifest_sha256, parse_manifest

# Only the lock may exist in a directory that `run` accepts as empty.
LOCK_NAME = ".lock"


@dataclass(frozen=True)
class ExperimentPaths:
    workspace: Path
    experiment_id: str

    @property
    def root(self) -> Path:
        return self.workspace / self.experiment_id

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.jsonl"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def best(self) -> Path:
        return self.root / "best.json"

    @property
    def controller(self) -> Path:
        return self.root / "controller.json"

    @property
    def cancel(self) -> Path:
        return self.root / "cancel.json"

    def trial_dir(self, index: int) -> Path:
        return self.root / f"trial-{index:05d}"

    def params_file(self, index: int) -> Path:
        return self.trial_dir(index) / "params.json"

    def holds_state(self) -> bool:
        """True when the directory holds anything but a lock file."""
        if not self.root.is_dir():
            return False
        return any(entry.name != LOCK_NAME for entry in self.root.iterdir())


class ExperimentLock:
    """An exclusive, non-blocking flock on `.lock`, released when the process exits."""

    def __init__(self, path: Path, *, create: bool) -> None:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self._fd = os.open(path, flags, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise Refused(
                f"another process holds the lock {path} (a running controller or cancel); "
                "only one controller per experiment; check `status`"
            ) from None

    def release(self) -> None:
        os.close(self._fd)


def write_recorded_manifest(paths: ExperimentPaths, manifest: Manifest) -> None:
    atomic_write_json(
        paths.manifest,
        {
            "manifest_sha256": manifest_sha256(manifest),
            "manifest": manifest.model_dump(mode="json"),
        },
    )


def read_recorded_manifest(paths: ExperimentPaths) -> Manifest:
    """The manifest `run` recorded, checked against its own digest."""
    try:
        data = json.loads(paths.manifest.read_bytes())
        manifest = parse_manifest(data["manifest"], str(paths.manifest))
        recorded = data["manifest_sha256"]
    except FileNotFoundError:
        raise CorruptState(f"{paths.manifest} is missing") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptState(f"{paths.manifest} is unreadable: {exc}") from None
    except InvalidInput as exc:  # a recorded manifest that no longer validates is corrupt
        raise CorruptState(str(exc)) from None
    if manifest_sha256(manifest) != recorded:
        raise CorruptState(f"{paths.manifest} does not match its recorded sha256")
    return manifest


def live_controller_pid(paths: ExperimentPaths) -> int | None:
    """The pid in controller.json if that process exists (a SIGKILLed controller leaves it)."""
    try:
        pid = int(json.loads(paths.controller.read_bytes())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # exists, owned by someone else
    return pid
