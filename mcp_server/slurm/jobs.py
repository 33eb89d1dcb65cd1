"""`slurm status` and `slurm cancel` of a submitted controller job: its job id comes from the
experiment's attempts ledger (the `submit` entry), its state from the scheduler (scheduler.py:
explicit formats, a fixed vocabulary, and "no accounting storage" said rather than guessed)."""

from __future__ import annotations

import subprocess

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.children.run import run_captured
from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.experiments.attempts import AttemptEntry, log_attempt, read_attempts
from mcp_server.experiments.binding import read_binding, resume_command
from mcp_server.experiments.files import ExperimentFiles, require_experiment
from mcp_server.experiments.status import experiment_status
from mcp_server.requests import StatusQuery
from mcp_server.slurm.requests import CancelRequest, SlurmStatusQuery
from mcp_server.slurm.scheduler import JobView, query_job
from mcp_server.values import JobId

SCANCEL_TIMEOUT_S = 60.0


class SlurmStatus(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment.")
    job_id: str = Field(description="Its SLURM controller job id.")
    scheduler: JobView = Field(description="The job as the scheduler reports it now.")
    generation: int | None = Field(
        description="The job's restart count (0: first allocation), from the scheduler, else "
        "from the newest allocation in the attempts ledger."
    )
    experiment_state: str = Field(description="The experiment's own state (experiment status).")
    trials_done: int | None = Field(description="Trials done; null when unknown.")
    planned_trials: int | None = Field(description="Trials planned; null when unknown.")
    last_attempt: AttemptEntry | None = Field(description="The newest attempts ledger entry.")
    notes: list[str] = Field(description="What else the records say.", default_factory=list)


class CancelledJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment.")
    job_id: str = Field(description="The cancelled SLURM job id.")
    done: str = Field(description="What was done, in words.")
    resume_command: str = Field(description="Continues the experiment after the cancel.")


def _submitted(files: ExperimentFiles, step: str) -> tuple[JobId, list[AttemptEntry]]:
    """The job id of the newest `submit` of the experiment, and the ledger it came from."""
    require_experiment(files, step, remedy="list experiments with", exit_code=ExitCode.REFUSED)
    entries, _torn = read_attempts(files)
    jobs = [e.job_id for e in entries if e.action == "submit" and e.job_id]
    if not jobs:
        raise SetupError(
            step,
            f"experiment {files.experiment_id} was never submitted to SLURM (no submit in "
            f"{files.attempts})",
            f"use `automl-setup status --experiment-id {files.experiment_id} --workspace "
            f"{files.workspace}` for an experiment started with launch",
        )
    return JobId(jobs[-1]), entries


def slurm_status(query: SlurmStatusQuery) -> SlurmStatus:
    files = ExperimentFiles(query.workspace.path, query.experiment_id)
    job_id, entries = _submitted(files, "slurm status")
    view = query_job(job_id)
    ran = [e.generation for e in entries if e.job_id == job_id and e.generation is not None]
    generation = view.generation if view.generation is not None else (ran[-1] if ran else None)
    status = experiment_status(
        StatusQuery(experiment_id=query.experiment_id, workspace=query.workspace)
    )
    notes = [view.note] if view.note else []
    return SlurmStatus(
        experiment_id=files.experiment_id,
        job_id=job_id,
        scheduler=view,
        generation=generation,
        experiment_state=status.state,
        trials_done=status.trials_done,
        planned_trials=status.planned_trials,
        last_attempt=status.last_attempt,
        notes=notes + status.notes,
    )


def slurm_cancel(request: CancelRequest) -> CancelledJob:
    step = "slurm cancel"
    files = ExperimentFiles(request.workspace.path, request.experiment_id)
    job_id, _entries = _submitted(files, step)
    if not request.approve:
        raise InvalidInput(
            step,
            f"cancelling job {job_id} of experiment {files.experiment_id} needs the user's yes",
            "ask the user, then repeat with --approve; nothing was done",
        )
    view = query_job(job_id)
    if not view.live:
        raise SetupError(
            step,
            f"job {job_id} is not pending or running ({view.state}); there is nothing to cancel",
            f"see `automl-setup slurm status --experiment-id {files.experiment_id} "
            f"--workspace {files.workspace}`",
        )
    try:
        proc = run_captured(["scancel", job_id], timeout=SCANCEL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(step, f"scancel could not run: {exc}", "check `sinfo`") from None
    if proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())[:300]
        raise SetupError(step, f"scancel {job_id} failed: {said}", "check `squeue`")
    log_attempt(files, action="cancel", outcome="accepted", job_id=job_id, reason=view.state)
    binding = read_binding(files)
    resume = resume_command(files, binding.manifest_path, binding.engine.environment_path)
    return CancelledJob(
        experiment_id=files.experiment_id,
        job_id=job_id,
        done=f"cancelled job {job_id} ({view.state}); the engine saves its state on SIGTERM",
        resume_command=resume,
    )
