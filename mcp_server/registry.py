"""Experiments registered with an environment, so an install can see what is bound to it.

`<sys.prefix>/.automl-setup/experiments/<id>--<hash of workspace>.json`, one file per
experiment launched from that environment.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from mcp_server.errors import SetupError
from mcp_server.fsutil import atomic_write_bytes

FINISHED_STATES = frozenset({"completed", "cancelled", "failed"})


@dataclass(frozen=True)
class RegisteredExperiment:
    experiment_id: str
    workspace: str
    identity_digest: str


def _entry_path(state_dir: Path, experiment_id: str, workspace: Path) -> Path:
    key = hashlib.sha256(str(workspace).encode()).hexdigest()[:12]
    return state_dir / "experiments" / f"{experiment_id}--{key}.json"


def register_experiment(
    state_dir: Path, experiment_id: str, workspace: Path, identity_digest: str
) -> None:
    entry = {
        "experiment_id": experiment_id,
        "workspace": str(workspace),
        "identity_digest": identity_digest,
    }
    path = _entry_path(state_dir, experiment_id, workspace)
    atomic_write_bytes(path, json.dumps(entry, indent=2, sort_keys=True).encode())


def registered_experiments(state_dir: Path) -> list[RegisteredExperiment]:
    out = []
    for path in sorted((state_dir / "experiments").glob("*.json")):
        try:
            data = json.loads(path.read_bytes())
            out.append(RegisteredExperiment(**data))
        except (ValueError, TypeError):
            # An unreadable entry cannot prove its experiment finished: count it as bound.
            out.append(RegisteredExperiment(path.stem, "(unreadable entry)", "*"))
    return out


def unfinished_experiments(state_dir: Path) -> list[RegisteredExperiment]:
    """Experiments launched or resumed from this environment whose engine state is not
    finished. A deleted workspace frees its experiment; a status that cannot be read keeps it
    bound (any doubt refuses the swap)."""
    from mcp_server.experiments import ExperimentFiles, engine_status, read_binding

    unfinished = []
    for entry in registered_experiments(state_dir):
        files = ExperimentFiles(Path(entry.workspace), entry.experiment_id)
        # A deleted experiment, or one the engine never created (it refused the manifest at
        # once), has nothing an engine swap could break.
        if entry.identity_digest != "*" and not (files.dir.exists() and files.engine_dir.exists()):
            continue
        try:
            status, _problem = engine_status(read_binding(files), str(state_dir.parent))
        except SetupError:  # a binding that cannot be read keeps the experiment bound
            status = None
        if status is None or status.get("state") not in FINISHED_STATES:
            unfinished.append(entry)
    return unfinished
