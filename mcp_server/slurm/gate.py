"""The identity gate every allocation of a controller job passes before its engine starts
(`automl-setup slurm gate`, called by the batch script, never by people or agents).

It appends the allocation to the experiment's attempts ledger: the end of the previous
generation (a requeue ended it; its engine exited without a process left to say so), then this
generation's start, accepted or refused with the job id, node, generation and identity digest.
The environment on this node must verify and match the binding field by field (`bound_engine`,
the same check as resume); the differences go to the job log and the ledger.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Literal

from mcp_server.environment.target import locate
from mcp_server.errors import ExitCode, SetupError
from mcp_server.experiments.attempts import log_attempt, read_attempts, record_refusal
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.files import ExperimentFiles, require_experiment
from mcp_server.experiments.resume import bound_engine
from mcp_server.values import ExperimentId, TargetPath, WorkspacePath

STEP = "slurm gate"


@dataclass(frozen=True)
class Allocation:
    """This allocation as the batch script and SLURM describe it."""

    experiment_id: ExperimentId
    workspace: WorkspacePath
    python: TargetPath
    generation: int
    cap: int
    action: Literal["run", "resume"]

    @property
    def job_id(self) -> str | None:
        return os.environ.get("SLURM_JOB_ID")

    @property
    def node(self) -> str:
        return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def _where(allocation: Allocation) -> dict[str, object]:
    return {
        "job_id": allocation.job_id,
        "generation": allocation.generation,
        "node": allocation.node,
        "action": "launch" if allocation.action == "run" else "resume",
    }


def _close_previous(files: ExperimentFiles, allocation: Allocation) -> None:
    """The end of the previous generation of this job, once: its engine was stopped by the
    requeue (its own ledger says how far it got), and no process was left to record it."""
    previous = allocation.generation - 1
    if previous < 0 or allocation.job_id is None:
        return
    entries, _torn = read_attempts(files)
    mine = [e for e in entries if e.job_id == allocation.job_id and e.generation == previous]
    if any(e.outcome == "accepted" for e in mine) and not any(e.action == "exit" for e in mine):
        log_attempt(
            files, action="exit", outcome="exited", job_id=allocation.job_id,
            generation=previous, node=next(e.node for e in mine if e.outcome == "accepted"),
            reason=f"allocation ended by a requeue; generation {allocation.generation} follows",
        )  # fmt: skip


def gate(allocation: Allocation, exhausted: bool) -> str:
    """Record this allocation; refuse (SetupError) when the cap is exhausted (exit 2) or this
    node's environment is not the bound build (exit 1; `slurm gate` exits 78 for it)."""
    files = ExperimentFiles(allocation.workspace.path, allocation.experiment_id)
    require_experiment(files, STEP, remedy="the controller's experiment is gone; list them with")
    _close_previous(files, allocation)
    where = _where(allocation)
    if exhausted:
        reason = (
            f"allocations exhausted: generation {allocation.generation} >= cap {allocation.cap}"
            " (AUTOML_CONTROLLER_MAX_ALLOCATIONS); nothing was started"
        )
        refusal = SetupError(
            STEP,
            reason,
            "resubmit with a larger --max-allocations if the experiment should go on",
            exit_code=ExitCode.INVALID_INPUT,
        )
        record_refusal(files, refusal, **where)
        raise refusal
    try:
        binding = read_binding(files)
        env = locate(allocation.python)
        remedy = (
            f"make the environment {env.prefix} on node {allocation.node} the bound build "
            "(docs/slurm.md: when a node's environment differs), or exclude the node"
        )
        with bound_engine(binding, env, remedy, STEP):
            pass
    except SetupError as exc:
        record_refusal(files, exc, **where)
        raise
    log_attempt(
        files, outcome="accepted", pid=os.getppid(), environment=str(env.prefix),
        identity_digest=binding.engine.identity_digest, log=_job_log(files, allocation), **where,
    )  # fmt: skip
    return (
        f"generation {allocation.generation} of job {allocation.job_id} on {allocation.node}: "
        f"the environment {env.prefix} is the bound build {binding.engine.identity_digest[:16]}"
    )


def _job_log(files: ExperimentFiles, allocation: Allocation) -> str | None:
    return str(files.dir / f"slurm-{allocation.job_id}.out") if allocation.job_id else None
