"""Experiments registered with an environment, so an install can see what is bound to it.

`<sys.prefix>/.automl-setup/experiments/<id>--<hash of workspace>.json`, one file per
experiment and workspace it was launched or resumed from in that environment (a moved
workspace registers again under its new path when it is resumed).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcp_server.errors import SetupError
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.engine import engine_status
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.fsutil import atomic_write_bytes, read_file
from mcp_server.persisted import Persisted, load_persisted
from mcp_server.values import ExperimentId

FINISHED_STATES = frozenset({"completed", "cancelled", "failed"})


class RegisteredExperiment(Persisted):
    """`<prefix>/.automl-setup/experiments/<id>--<hash>.json`."""

    schema_version: Literal[1] = 1
    experiment_id: str
    workspace: str
    identity_digest: str


@dataclass(frozen=True)
class BoundExperiment:
    """An experiment that keeps the environment's engine in place; `workspace` is where it is,
    or why its registry entry could not be read."""

    experiment_id: str
    workspace: str


def _entry_path(state_dir: Path, experiment_id: str, workspace: Path) -> Path:
    key = hashlib.sha256(str(workspace).encode()).hexdigest()[:12]
    return state_dir / "experiments" / f"{experiment_id}--{key}.json"


def register_experiment(
    state_dir: Path, experiment_id: str, workspace: Path, identity_digest: str
) -> None:
    entry = RegisteredExperiment(
        experiment_id=experiment_id, workspace=str(workspace), identity_digest=identity_digest
    )
    path = _entry_path(state_dir, experiment_id, workspace)
    atomic_write_bytes(path, entry.model_dump_json(indent=2).encode())


def registered_experiments(state_dir: Path) -> list[RegisteredExperiment | BoundExperiment]:
    """Every entry, strictly read; an entry that cannot be read is returned as a
    `BoundExperiment` saying why (it cannot prove its experiment finished)."""
    out: list[RegisteredExperiment | BoundExperiment] = []
    for path in sorted((state_dir / "experiments").glob("*.json")):
        try:
            data = read_file(path)  # a link or another's file: unreadable, so still bound
            if data is None:
                continue  # removed meanwhile
            out.append(
                load_persisted(
                    RegisteredExperiment,
                    data,
                    what="registry entry",
                    path=path,
                    remedy="restore it from a backup",
                )
            )
        except SetupError as exc:
            out.append(BoundExperiment(path.stem, f"registry entry unreadable: {exc.cause}"))
    return out


def unfinished_experiments(state_dir: Path) -> list[BoundExperiment]:
    """Experiments launched or resumed from this environment whose engine state is not
    finished. A deleted workspace frees its experiment; a status or entry that cannot be read
    keeps it bound (any doubt refuses the swap)."""
    unfinished = []
    for entry in registered_experiments(state_dir):
        if isinstance(entry, BoundExperiment):
            unfinished.append(entry)
            continue
        workspace = Path(entry.workspace)
        try:
            files = ExperimentFiles(workspace, ExperimentId(entry.experiment_id))
            present = files.dir.exists() and files.engine_dir.exists()
        except (SetupError, OSError, ValueError):  # doubt keeps it bound
            present = None
        if present is None or not workspace.is_absolute():
            why = f"{entry.workspace[:200]!r}: cannot be looked at"
            unfinished.append(BoundExperiment(entry.experiment_id[:64], why))
            continue
        # A deleted (or moved away) experiment, or one the engine never created (it refused
        # the manifest at once), has nothing an engine swap could break.
        if not present:
            continue
        try:
            binding = read_binding(files)
            status, _problem = engine_status(binding, files.workspace, str(state_dir.parent))
        except SetupError:  # a binding that cannot be read keeps the experiment bound
            status = None
        if status is None or status.get("state") not in FINISHED_STATES:
            unfinished.append(BoundExperiment(entry.experiment_id, entry.workspace))
    return unfinished


def bound_experiments(state_dir: Path) -> list[str]:
    """The install guard's question (transition rule 2): "id (workspace)" of every unfinished
    experiment bound to the environment whose state dir this is."""
    return [f"{e.experiment_id} ({e.workspace})" for e in unfinished_experiments(state_dir)]
