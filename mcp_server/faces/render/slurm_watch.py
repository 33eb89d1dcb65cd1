"""Texts of the SLURM watcher's results: a registration, a tick, and one line per receipt."""

from __future__ import annotations

from mcp_server.slurm.jobregistry import Registration
from mcp_server.slurm.receipts import Receipt
from mcp_server.slurm.watcher import WatchedJob, WatchTick


def receipt_line(receipt: Receipt) -> str:
    """One receipt in one line: number, time, kind, the sentence, and the command if any."""
    number = f"#{receipt.receipt}" if receipt.receipt else "(not stored)"
    line = f"{number} {receipt.time} {receipt.kind.replace('_', ' ')}: {receipt.detail}"
    return f"{line}\n    run: {receipt.command}" if receipt.command else line


def _job_line(job: WatchedJob) -> str:
    state: str = job.state or "? (scheduler not asked)"
    if job.reason:
        state += f" ({job.reason})"
    generation = "?" if job.generation is None else str(job.generation)
    trials = "?" if job.trials_done is None else str(job.trials_done)
    line = (
        f"  job {job.job_id} {job.experiment_id}: {state}, generation {generation}; "
        f"experiment {job.experiment_state or '?'}, {trials} trials done"
    )
    return f"{line}\n    note: {job.note}" if job.note else line


def tick_text(tick: WatchTick) -> str:
    head = f"watch {tick.workspace} at {tick.time}: {len(tick.jobs)} job(s) registered"
    if not tick.jobs:
        head += " (register one: `automl-setup slurm watch register`)"
    lines = [head, *map(_job_line, tick.jobs)]
    lines += [receipt_line(r) for r in tick.receipts] or ["  nothing new"]
    return "\n".join(lines)


def registration_text(result: Registration) -> str:
    job = result.job
    verb = "already registered" if result.already_registered else "registered"
    return (
        f"{verb}: job {job.job_id} controls experiment {job.experiment_id} "
        f"(owner {job.user}, uid {job.uid}; identity {job.identity_digest[:16]}; "
        f"submitted {job.submitted})\n  registry: {result.registry}"
    )
