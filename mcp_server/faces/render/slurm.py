"""Texts of the SLURM controller results: submit, status, cancel."""

from __future__ import annotations

from mcp_server.slurm.jobs import CancelledJob, SlurmStatus
from mcp_server.slurm.submit import SubmittedController


def submitted_text(result: SubmittedController) -> str:
    lines = [
        f"submitted experiment {result.experiment_id} as SLURM job {result.job_id} "
        f"(at most {result.max_allocations} allocations)",
        f"  script:   {result.script_path} (sha256 {result.template_sha256})",
        f"  job log:  {result.job_log}",
        f"  commit:   {result.engine_commit or 'none (a reviewed wheel)'}",
        f"  identity: {result.identity_digest}",
        f"  binding:  {result.binding_path}",
        f"  attempts: {result.attempts_path}",
    ]
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)


def slurm_status_text(status: SlurmStatus) -> str:
    job = status.scheduler
    state = job.state + (f" ({job.reason})" if job.reason else "")
    generation = "unknown" if status.generation is None else str(status.generation)
    trials = "unknown" if status.trials_done is None else str(status.trials_done)
    if status.planned_trials is not None:
        trials += f" of {status.planned_trials}"
    lines = [
        f"experiment {status.experiment_id}: SLURM job {status.job_id} {state}",
        f"  generation: {generation}",
        f"  experiment: {status.experiment_state}, trials done {trials}",
    ]
    if status.last_attempt is not None:
        a = status.last_attempt
        where = f" job {a.job_id} generation {a.generation}" if a.job_id else ""
        lines.append(f"  last entry: #{a.attempt} {a.action} {a.outcome}{where} at {a.time}")
    lines += [f"  note: {n}" for n in status.notes]
    return "\n".join(lines)


def cancelled_text(result: CancelledJob) -> str:
    return f"{result.done}\n  resume later: {result.resume_command}"
