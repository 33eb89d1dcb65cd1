"""MCP tools of the SLURM watcher: watch_slurm (one tick of `slurm watch`) and
register_slurm_watch (`slurm watch register`)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.faces.mcp_app import Message, reply, server
from mcp_server.faces.mcp_inputs import ExperimentId, Workspace
from mcp_server.faces.mcp_roots import Roots, check_roots
from mcp_server.faces.mcp_runtime import hints, run
from mcp_server.slurm.registry import Registration, WatchRegisterRequest, adopt
from mcp_server.slurm.watch import DEFAULT_PENDING_AFTER_S, WatchRequest, WatchTick, tick

JobId = Annotated[
    str, Field(min_length=1, max_length=31, description="The SLURM job id sbatch printed.")
]
PendingAfter = Annotated[
    int, Field(ge=0, description="Seconds a job may wait before it is reported.")
]


class WatchReply(WatchTick):
    message: Message


class RegistrationReply(Registration):
    message: Message


@server.tool(
    **hints(
        "Watch the SLURM controller jobs (one tick)",
        read_only=False,  # appends receipts and the watcher's memory in the workspace
        destructive=False,
        idempotent=False,  # a second tick reports only what happened since the first
        open_world=True,  # asks the SLURM scheduler
    )
)
async def watch_slurm(
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    pending_after: PendingAfter = DEFAULT_PENDING_AFTER_S,
) -> WatchReply:
    """One tick over the workspace's registered SLURM controller jobs: each job's scheduler
    state, generation and its experiment's own status, and a receipt (also appended to
    <workspace>/.automl-setup/slurm-receipts.jsonl) for everything that happened since the
    last tick: state changes, generation boundaries, long waits, a job that ended while its
    experiment is unfinished (with the resume command), conflicts, scheduler or storage
    errors."""

    def work() -> WatchReply:
        check_roots(roots, workspace=workspace)
        request = WatchRequest(workspace=workspace, pending_after=pending_after, once=True)
        return reply(WatchReply, "slurm watch", tick(request))

    return await run(ctx, work)


@server.tool(
    **hints(
        "Register a SLURM job as an experiment's controller",
        read_only=False,  # adds one entry to the workspace's registry
        destructive=False,  # a conflicting registration is refused, never replaced
        idempotent=True,  # the same job for the same experiment is "already registered"
        open_world=True,  # asks the SLURM scheduler about the job
    )
)
async def register_slurm_watch(
    job_id: JobId, experiment_id: ExperimentId, workspace: Workspace, ctx: Context, roots: Roots
) -> RegistrationReply:
    """Adopt an existing SLURM job as the controller of an experiment of the workspace, so
    that watch_slurm ticks over it. Refused, naming both sides: the job registered for another
    experiment, a second live job for the same experiment, a job of another user."""

    def work() -> RegistrationReply:
        check_roots(roots, workspace=workspace)
        request = WatchRegisterRequest(
            job_id=job_id, experiment_id=experiment_id, workspace=workspace
        )
        return reply(RegistrationReply, "slurm watch register", adopt(request))

    return await run(ctx, work)
