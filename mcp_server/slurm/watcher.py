"""One tick of the watcher: every registered job as the scheduler sees it, beside its
experiment's own view, and a receipt for everything that happened since the last tick.

What happened is judged against what the last tick saw (`slurm-watch.json`, the watcher's
memory): a state change, a generation boundary (restart count up), a wait longer than
`pending_after`, a job that ended while its experiment is unfinished (with the resume command),
a job's owner or its experiment's binding digest differing from the registration, two live
jobs for one experiment. Each is reported once. A tick holds the registry lock from reading
the memory to writing it, so two watchers never report the same thing twice.

A scheduler that cannot be asked gives a `scheduler_error` receipt and leaves the memory
untouched (the next tick asks again and sees what this one could not). Storage that cannot be
written gives a `storage_error` receipt in the result (it cannot be stored) and no change.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_server.environment.records import utc_now
from mcp_server.errors import InvalidInput, SetupError
from mcp_server.experiments.binding import read_binding, resume_command
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.status import experiment_status
from mcp_server.fsutil import atomic_write_bytes, read_file
from mcp_server.persisted import Persisted, load_persisted
from mcp_server.requests import Request, StatusQuery
from mcp_server.slurm.jobregistry import (
    RegisteredJob,
    read_registry,
    registry_lock,
    require_usable_storage,
    sidecar,
)
from mcp_server.slurm.receipts import Receipt, append_receipts, clean, plain_word, receipts_path
from mcp_server.slurm.scheduler import WAITING_STATES, JobState, JobView, SchedulerError, query_jobs
from mcp_server.values import WorkspacePath

MEMORY = "slurm-watch.json"
FINISHED = frozenset({"completed", "cancelled", "failed"})  # the engine's own end states
DEFAULT_PENDING_AFTER_S = 3600


class WatchRequest(Request):
    workspace: WorkspacePath
    pending_after: int = Field(
        DEFAULT_PENDING_AFTER_S,
        description="Seconds a job may wait before it is reported.",
        json_schema_extra={"ge": 0},
    )
    once: bool = Field(False, description="One tick, then exit.")
    interval: float | None = Field(None, description="Seconds between ticks, until interrupted.")

    @model_validator(mode="after")
    def _one_mode(self) -> WatchRequest:
        if self.once == (self.interval is not None):
            raise InvalidInput(
                "watch", "pass exactly one of --once and --interval", "e.g. --once, --interval 60"
            )
        if (self.interval is not None and self.interval <= 0) or self.pending_after < 0:
            raise InvalidInput(
                "watch", "--interval must be above 0 and --pending-after not below 0", "fix it"
            )
        return self


class JobMemory(Persisted):
    job_id: str
    state: JobState
    generation: int | None
    waited_reported: int | None = Field(description="Generation whose long wait was reported.")
    ended_reported: bool
    owner_reported: bool
    identity_reported: bool


class WatchMemory(Persisted):
    schema_version: Literal[1] = 1
    jobs: list[JobMemory] = Field(default_factory=list)
    live_conflicts: list[str] = Field(default_factory=list)


class WatchedJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(description="SLURM job id.")
    experiment_id: str = Field(description="The experiment it controls.")
    state: JobState | None = Field(description="None when the scheduler could not be asked.")
    reason: str | None = Field(description="Why it waits (squeue's Reason).")
    generation: int | None = Field(
        description="Allocation generation (0: the first); null when unknown."
    )
    experiment_state: str | None = Field(description="The engine's own status word.")
    trials_done: int | None = Field(description="Trials done; null when unknown.")
    note: str = Field("", description="What else the tick noticed.")


class WatchTick(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workspace: str = Field(description="The workspace watched.")
    time: str = Field(description="When the tick ran (ISO 8601 UTC).")
    jobs: list[WatchedJob] = Field(description="Every registered job, as the tick saw it.")
    receipts: list[Receipt] = Field(description="What happened this tick (receipt 0: unstored).")
    receipts_path: str = Field(description="The receipts file the tick appended to.")

    @property
    def exit_code(self) -> int:
        failed = {"scheduler_error", "storage_error"}
        return 1 if any(r.kind in failed for r in self.receipts) else 0


class _Experiment(BaseModel):
    state: str | None = None
    trials_done: int | None = None
    digest: str | None = None
    command: str | None = None
    note: str = ""


def tick(request: WatchRequest) -> WatchTick:
    workspace = request.workspace.path
    now = utc_now()
    where = receipts_path(sidecar(workspace))
    if not sidecar(workspace).is_dir():
        return WatchTick(
            workspace=str(workspace), time=now, jobs=[], receipts=[], receipts_path=str(where)
        )
    with registry_lock(workspace, "watch"):
        registered = read_registry(workspace).jobs
        memory = _read_memory(workspace)
        experiments = {r.experiment_id: _experiment(workspace, r) for r in registered}
        views: dict[str, JobView] | None = None
        after: WatchMemory | None = None  # None: nothing to remember anew
        try:
            views = query_jobs(r.job_id for r in registered)
            drafts, after = _judge(registered, views, experiments, memory, now, request)
        except SchedulerError as exc:
            drafts = [_draft(now, "scheduler_error", detail=_said(exc))]
        receipts = _store(workspace, drafts, after if after != memory else None, now)
    jobs = [_row(r, views, experiments[r.experiment_id]) for r in registered]
    return WatchTick(
        workspace=str(workspace), time=now, jobs=jobs, receipts=receipts, receipts_path=str(where)
    )


def _experiment(workspace: Path, job: RegisteredJob) -> _Experiment:
    """The experiment's own view: the engine's status (through the attempts ledger and the
    controller lock) and the resume command; an unreadable experiment is a note, not a stop."""
    query = StatusQuery(experiment_id=job.experiment_id, workspace=WorkspacePath(str(workspace)))
    try:
        status = experiment_status(query)
        files = ExperimentFiles(query.workspace.path, query.experiment_id)
        manifest = read_binding(files).manifest_path
    except SetupError as exc:
        return _Experiment(note=clean(exc.message))
    return _Experiment(
        state=status.state,
        trials_done=status.trials_done,
        digest=status.identity_digest,
        # status's own command when it has one (it knows the environment last used).
        command=status.resume_command or resume_command(files, manifest, status.bound_environment),
    )


def _draft(now: str, kind: str, **fields: Any) -> dict[str, Any]:
    fields["detail"] = clean(fields["detail"])
    return {"receipt": 0, "time": now, "kind": kind, **fields}


def _judge(
    registered: list[RegisteredJob],
    views: dict[str, JobView],
    experiments: dict[str, _Experiment],
    memory: WatchMemory,
    now: str,
    request: WatchRequest,
) -> tuple[list[dict[str, Any]], WatchMemory]:
    """The receipts of this tick and the memory after it."""
    seen = {m.job_id: m for m in memory.jobs}
    drafts: list[dict[str, Any]] = []
    remembered = []
    for reg in registered:
        found, after = _judge_job(
            reg, views[reg.job_id], experiments[reg.experiment_id], seen.get(reg.job_id), now,
            request.pending_after,
        )  # fmt: skip
        drafts += found
        remembered.append(after)
    conflicts = _live_conflicts(registered, views)
    for key, (experiment, jobs) in conflicts.items():
        if key not in memory.live_conflicts:
            detail = f"experiment {experiment} has {len(jobs)} live jobs: {', '.join(jobs)}"
            drafts.append(_draft(now, "live_conflict", experiment_id=experiment, detail=detail))
    return drafts, WatchMemory(jobs=remembered, live_conflicts=sorted(conflicts))


def _judge_job(
    reg: RegisteredJob,
    view: JobView,
    exp: _Experiment,
    last: JobMemory | None,
    now: str,
    pending_after: int,
) -> tuple[list[dict[str, Any]], JobMemory]:
    """What happened to one job since `last`, and what to remember of it."""
    drafts: list[dict[str, Any]] = []
    generation = (
        view.generation if view.generation is not None else (last.generation if last else None)
    )
    here = {
        "job_id": reg.job_id,
        "experiment_id": reg.experiment_id,
        "state": view.state,
        "generation": generation,
        "reason": plain_word(view.reason),
        "experiment_state": exp.state,
    }

    def report(kind: str, detail: str, **extra: Any) -> None:
        drafts.append(_draft(now, kind, **here, **extra, detail=f"job {reg.job_id}: {detail}"))

    owner = bool(last and last.owner_reported)
    if view.uid is not None and view.uid != reg.uid and not owner:
        owner = True
        report("owner_conflict", f"owned by uid {view.uid}, registered for uid {reg.uid}")
    identity = bool(last and last.identity_reported)
    if exp.digest is not None and exp.digest != reg.identity_digest and not identity:
        identity = True
        report(
            "identity_conflict",
            f"registered for identity {reg.identity_digest[:16]}, but experiment "
            f"{reg.experiment_id} is bound to {exp.digest[:16]}",
        )
    if last is None or last.state != view.state:
        before = last.state if last else None
        report("state_change", f"{before or 'first seen'} -> {view.state}", previous_state=before)
    if last and last.generation is not None and generation and generation > last.generation:
        report(
            "generation_boundary",
            f"generation {last.generation} -> {generation} (allocation {generation + 1})",
            previous_generation=last.generation,
        )
    waited_reported = last.waited_reported if last else None
    waited = _seconds_since(view.submitted, now)
    waiting = view.state in WAITING_STATES and waited is not None and waited >= pending_after
    if waiting and waited_reported != generation:
        waited_reported = generation
        why = plain_word(view.reason) or "no reason given"
        report("pending_too_long", f"waiting for {waited} s ({why})", waited_seconds=waited)
    ended = bool(last and last.ended_reported) and view.ended
    if view.ended and not ended and exp.state not in FINISHED:
        ended = True
        report(
            "ended_unfinished",
            f"ended ({view.state}) while experiment {reg.experiment_id} is "
            f"{exp.state or 'unreadable'}; continue it with the command",
            command=exp.command,
        )
    after = JobMemory(
        job_id=reg.job_id,
        state=view.state,
        generation=generation,
        waited_reported=waited_reported,
        ended_reported=ended,
        owner_reported=owner,
        identity_reported=identity,
    )
    return drafts, after


def _live_conflicts(
    registered: list[RegisteredJob], views: dict[str, JobView]
) -> dict[str, tuple[str, list[str]]]:
    live: dict[str, list[str]] = {}
    for reg in registered:
        if views[reg.job_id].live:
            live.setdefault(reg.experiment_id, []).append(reg.job_id)
    return {
        f"{exp}:{','.join(sorted(jobs))}": (exp, sorted(jobs))
        for exp, jobs in live.items()
        if len(jobs) > 1
    }


def _seconds_since(then: str | None, now: str) -> int | None:
    if then is None:
        return None
    start = datetime.fromisoformat(then)
    return max(
        0, int((datetime.fromisoformat(now) - start.astimezone(timezone.utc)).total_seconds())
    )


def _store(
    workspace: Path, drafts: list[dict[str, Any]], memory: WatchMemory | None, now: str
) -> list[Receipt]:
    """Append the receipts, then the memory (None: keep it). Storage that cannot take them
    turns into one more, unstored receipt; the memory is then left as it was."""
    if not drafts and memory is None:
        return []  # nothing to write: a quiet tick works on read-only storage too
    side = sidecar(workspace)
    try:
        require_usable_storage(side, "watch")
        receipts = append_receipts(receipts_path(side), drafts)
        if memory is not None:
            data = memory.model_dump_json(indent=2).encode() + b"\n"
            atomic_write_bytes(side / MEMORY, data)
    except SetupError as exc:
        unstored = [Receipt(**d) for d in drafts]
        return [*unstored, Receipt(**_draft(now, "storage_error", detail=_said(exc)))]
    return receipts


def _said(exc: SetupError) -> str:
    return f"{exc.step}: {exc.cause}"


def _read_memory(workspace: Path) -> WatchMemory:
    path = sidecar(workspace) / MEMORY
    data = read_file(path)
    if data is None:
        return WatchMemory()
    remedy = "move it aside: the next tick starts afresh (and reports every job's state once)"
    return load_persisted(WatchMemory, data, what="watcher memory", path=path, remedy=remedy)


def _row(reg: RegisteredJob, views: dict[str, JobView] | None, exp: _Experiment) -> WatchedJob:
    view = views[reg.job_id] if views is not None else None
    return WatchedJob(
        job_id=reg.job_id,
        experiment_id=reg.experiment_id,
        state=view.state if view else None,
        reason=plain_word(view.reason) if view else None,
        generation=view.generation if view else None,
        experiment_state=exp.state,
        trials_done=exp.trials_done,
        note=clean(view.note if view and view.note else exp.note),
    )
