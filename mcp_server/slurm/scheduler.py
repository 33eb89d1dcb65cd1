"""What the SLURM scheduler says about jobs, in a fixed vocabulary.

`query_jobs(ids)` asks `squeue` (every state, explicit `--Format` fields) and, for the jobs the
controller has already forgotten (`MinJobAge`), `sacct` (explicit `--format`). When accounting
storage is not configured it says so in the job's `note` instead of guessing an end state.
Only allow-listed fields are ever requested: never the job's name, command, working directory,
comment or environment, so nothing the user put there can leak through a view.

A failure to ask (controller unreachable, a command missing or failing) raises
`SchedulerError`: the caller reports it and asks again later; it is never turned into a state.

    query_job("4242") -> JobView(state="pending", reason="Priority", generation=0, ...)
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.children.run import run_captured
from mcp_server.errors import SetupError
from mcp_server.redact import redact_text
from mcp_server.values import JobId

JobState = Literal[
    "pending",
    "running",
    "requeued",
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "node_fail",
    "preempted",
    "out_of_memory",
    "unknown",
]
LIVE_STATES: frozenset[str] = frozenset({"pending", "running", "requeued"})
WAITING_STATES: frozenset[str] = frozenset({"pending", "requeued"})

# The scheduler's own state words (squeue's extended form, sacct's first word) -> ours.
_STATES: dict[str, JobState] = {
    "PENDING": "pending",
    "REQUEUED": "requeued",
    "REQUEUE_HOLD": "requeued",
    "REQUEUE_FED": "requeued",
    "RUNNING": "running",
    "CONFIGURING": "running",
    "COMPLETING": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "RESIZING": "running",
    "COMPLETED": "completed",
    "FAILED": "failed",
    "SPECIAL_EXIT": "failed",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "NODE_FAIL": "node_fail",
    "BOOT_FAIL": "node_fail",
    "PREEMPTED": "preempted",
    "OUT_OF_MEMORY": "out_of_memory",
}

DELIMITER = "|"  # none of the requested fields can contain it
SQUEUE_FIELDS = ("JobID", "State", "Reason", "RestartCnt", "UserID", "UserName", "SubmitTime")
SACCT_FIELDS = ("JobIDRaw", "State", "UID", "User", "Submit")
QUERY_TIMEOUT_S = 60.0
NO_ACCOUNTING = "no accounting storage configured"


class JobView(BaseModel):
    """One job as the scheduler reports it, allow-listed fields only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(description="SLURM job id.")
    state: JobState = Field(description="Job state in automl-setup's fixed vocabulary.")
    scheduler_state: str = Field(description="The scheduler's own word, e.g. PENDING, or ''.")
    reason: str | None = Field(
        None, description="Why the job waits (squeue's Reason), for pending and requeued jobs."
    )
    generation: int | None = Field(
        None, description="SLURM's restart count (0 for the first allocation); None if unknown."
    )
    uid: int | None = Field(None, description="Owner's uid, when reported.")
    user: str | None = Field(None, description="Owner's user name, when reported.")
    submitted: str | None = Field(
        None, description="Submit (or last requeue) time, ISO 8601 UTC, when known."
    )
    source: Literal["squeue", "sacct", "none"] = Field(
        description="Which command answered; none: the scheduler no longer knows the job."
    )
    note: str = Field("", description="What else to know (the scheduler could not be asked, ...).")

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def ended(self) -> bool:
        """Over for good: an end state, or forgotten by the scheduler (whatever its end was)."""
        return self.source == "none" or self.state not in {*LIVE_STATES, "unknown"}


class SchedulerError(SetupError):
    """The scheduler could not be asked (unreachable, a command missing or failing)."""

    def __init__(self, cause: str) -> None:
        super().__init__(
            "query scheduler",
            cause,
            "check that slurmctld is up (`scontrol ping`) and SLURM_CONF names its "
            "configuration; the watcher asks again on its next tick",
        )


def derive_state(scheduler_state: str, restarts: int | None) -> JobState:
    """Our state for the scheduler's word: a job pending after a requeue (restart count >= 1)
    is `requeued`, waiting for its next allocation; an unknown word is `unknown`."""
    word = scheduler_state.strip().split(" ", 1)[0].upper()  # sacct: "CANCELLED by 0"
    state = _STATES.get(word, "unknown")
    if state == "pending" and restarts:
        return "requeued"
    return state


def query_job(job_id: str) -> JobView:
    return query_jobs([job_id])[JobId(job_id)]


def query_jobs(job_ids: Iterable[str]) -> dict[str, JobView]:
    """A view of every job asked for (ids as `JobId`), by id, in one `squeue` call (and one
    `sacct` call for the jobs squeue no longer lists)."""
    ids: list[str] = sorted({JobId(j) for j in job_ids}, key=lambda j: (len(j), j))
    if not ids:
        return {}
    views = parse_squeue(_squeue(ids))
    gone = [j for j in ids if j not in views]
    if gone:
        views.update(_forgotten(gone))
    return {j: views[j] for j in ids}


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return run_captured(argv, timeout=QUERY_TIMEOUT_S)
    except FileNotFoundError:
        raise SchedulerError(f"{argv[0]} is not installed (not found on PATH)") from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"{argv[0]} did not answer within {QUERY_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise SchedulerError(f"{argv[0]} could not run: {exc.strerror or exc}") from None


def _failure(argv: Sequence[str], proc: subprocess.CompletedProcess[str]) -> SchedulerError:
    said = " ".join((proc.stderr or proc.stdout).split())[:300] or "no output"
    return SchedulerError(f"{argv[0]} failed (exit {proc.returncode}): {redact_text(said)}")


def _squeue(ids: list[str]) -> str:
    fmt = ",".join(f"{field}:{DELIMITER}" for field in SQUEUE_FIELDS)
    argv = ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}", f"--Format={fmt}"]
    proc = _run(argv)
    if proc.returncode != 0:
        # Asked only for jobs it has forgotten, squeue fails with this; that is an answer.
        if "Invalid job id specified" in proc.stderr:
            return ""
        raise _failure(argv, proc)
    return proc.stdout


def _forgotten(ids: list[str]) -> dict[str, JobView]:
    """Jobs squeue no longer lists: sacct knows their end, when accounting storage exists."""
    argv = [
        "sacct",
        "--noheader",
        "--parsable2",
        "--allocations",
        f"--jobs={','.join(ids)}",
        f"--format={','.join(SACCT_FIELDS)}",
    ]
    proc = _run(argv)
    said = f"{proc.stderr} {proc.stdout}".lower()
    if proc.returncode != 0 and "accounting storage is disabled" in said:
        note = (
            f"{NO_ACCOUNTING} (sacct: accounting storage is disabled) and the controller no "
            "longer lists the job: its end state is unknown, not guessed"
        )
        return {j: _unknown(j, note) for j in ids}
    if proc.returncode != 0:
        raise _failure(argv, proc)
    views = parse_sacct(proc.stdout)
    note = "neither squeue nor sacct knows this job"
    return {j: views.get(j) or _unknown(j, note) for j in ids}


def _unknown(job_id: str, note: str) -> JobView:
    return JobView(job_id=job_id, state="unknown", scheduler_state="", source="none", note=note)


def parse_squeue(text: str) -> dict[str, JobView]:
    """Views from `squeue --noheader --Format=<SQUEUE_FIELDS, each ending in '|'>` output."""
    views = {}
    for fields in _rows(text, len(SQUEUE_FIELDS)):
        job_id, state, reason, restarts, uid, user, submitted = fields
        generation = _int(restarts)
        ours = derive_state(state, generation)
        views[job_id] = JobView(
            job_id=job_id,
            state=ours,
            scheduler_state=state,
            reason=reason if ours in WAITING_STATES and reason not in ("", "None") else None,
            generation=generation,
            uid=_int(uid),
            user=user or None,
            submitted=_utc(submitted),
            source="squeue",
        )
    return views


def parse_sacct(text: str) -> dict[str, JobView]:
    """Views from `sacct --noheader --parsable2 --format=<SACCT_FIELDS>` output (no restart
    count there: generation stays unknown)."""
    views = {}
    for fields in _rows(text, len(SACCT_FIELDS)):
        job_id, state, uid, user, submitted = fields
        views[job_id] = JobView(
            job_id=job_id,
            state=derive_state(state, None),
            scheduler_state=state,
            uid=_int(uid),
            user=user or None,
            submitted=_utc(submitted),
            source="sacct",
        )
    return views


def _rows(text: str, width: int) -> Iterable[list[str]]:
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(DELIMITER)]
        if fields and fields[-1] == "":  # squeue ends every field, the last one too
            fields = fields[:-1] if len(fields) > width else fields
        if len(fields) == width and fields[0]:
            yield fields


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _utc(text: str) -> str | None:
    """The scheduler's local time (2026-12-01T10:26:15) as ISO 8601 UTC; None if not a time."""
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc).isoformat()
    except ValueError:
        return None
