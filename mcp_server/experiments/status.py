"""The status of an experiment (its binding, ledger, lock and the engine's own answer) and the
listing of a workspace's experiments."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.experiments.attempts import AttemptEntry, read_attempts
from mcp_server.experiments.binding import read_binding, relocation, resume_command
from mcp_server.experiments.engine import engine_status
from mcp_server.experiments.files import (
    SIDECAR,
    ExperimentFiles,
    lock_is_held,
    require_experiment,
)
from mcp_server.requests import ListQuery, StatusQuery


class ExperimentStatus(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str
    workspace: str
    state: str
    controller_running: bool
    trials_done: int | None
    best: dict[str, Any] | None
    bound_commit: str
    bound_ref: str | None
    bound_environment: str
    identity_digest: str
    last_attempt: AttemptEntry | None
    attempts_torn_line: int | None = None
    notes: list[str] = Field(default_factory=list)


def experiment_status(query: StatusQuery) -> ExperimentStatus:
    experiment_id = query.experiment_id
    files = ExperimentFiles(query.workspace.path, experiment_id)
    require_experiment(
        files, "status", remedy="list experiments with", exit_code=ExitCode.NOTHING_INSTALLED
    )
    binding = read_binding(files)
    entries, torn_line = read_attempts(files)
    accepted = [e.environment for e in entries if e.outcome == "accepted" and e.environment]
    environment = accepted[-1] if accepted else None
    data, problem = engine_status(binding, files.workspace, environment)
    # After the engine's answer: a "running" it gives for an engine that died since is caught.
    running = lock_is_held(files)
    notes = [problem] if problem else []
    moved = relocation(binding, files)
    if moved:
        notes.append(moved)
    if torn_line:
        notes.append(f"attempts ledger line {torn_line} is torn (interrupted write)")
    state = str(data["state"]) if data else ("running" if running else "unknown")
    if state == "running" and not running:
        # The engine holds the controller lock for its whole life, so a free lock proves it
        # is gone, whatever its own files (a killed controller's pid, since reused) say.
        state = "interrupted"
        resume = resume_command(
            files, binding.manifest_path, environment or binding.engine.environment_path
        )
        notes.append(
            "the engine reports running, but no engine process holds the controller lock (it "
            f"was killed); continue it with `{resume}`"
        )
    return ExperimentStatus(
        experiment_id=experiment_id,
        workspace=str(files.workspace),
        state=state,
        controller_running=running,
        trials_done=data.get("trials_done") if data else None,
        best=data.get("best") if data else None,
        bound_commit=binding.engine.source.commit,
        bound_ref=binding.engine.source.requested_ref,
        bound_environment=binding.engine.environment_path,
        identity_digest=binding.engine.identity_digest,
        last_attempt=entries[-1] if entries else None,
        attempts_torn_line=torn_line,
        notes=notes,
    )


class ExperimentListing(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workspace: str
    experiments: list[ExperimentStatus]
    unreadable: list[str] = Field(
        default_factory=list, description="Experiments whose files could not be read, and why."
    )


def list_experiments(query: ListQuery) -> ExperimentListing:
    """Every experiment of the workspace; one damaged experiment does not hide the others."""
    where = query.workspace.path
    if where.exists() and not where.is_dir():
        raise InvalidInput("list", f"{where} is not a directory", "pass the workspace")
    root = where / SIDECAR
    found, unreadable = [], []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if not path.is_dir():
            continue
        try:
            found.append(
                experiment_status(StatusQuery(experiment_id=path.name, workspace=query.workspace))
            )
        except SetupError as exc:
            unreadable.append(f"{path.name}: {exc.message}")
    return ExperimentListing(workspace=str(where), experiments=found, unreadable=unreadable)
