"""MCP tools of the SLURM watcher: watch_slurm (one tick of `slurm watch`) and
register_slurm_watch (`slurm watch register`)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.faces.mcp_app import Reply, call, tool
from mcp_server.faces.mcp_inputs import ExperimentId, Workspace
from mcp_server.faces.mcp_roots import Roots
from mcp_server.slurm.registry import Registration
from mcp_server.slurm.watch import DEFAULT_PENDING_AFTER_S, WatchTick

JobId = Annotated[
    str, Field(min_length=1, max_length=31, description="The SLURM job id sbatch printed.")
]
PendingAfter = Annotated[
    int, Field(ge=0, description="Seconds a job may wait before it is reported.")
]


@tool("slurm watch")
async def watch_slurm(
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    pending_after: PendingAfter = DEFAULT_PENDING_AFTER_S,
) -> Reply[WatchTick]:
    """One tick over the workspace's registered SLURM controller jobs: each job's scheduler
    state, generation and its experiment's own status, and a receipt (also appended to
    <workspace>/.automl-setup/slurm-receipts.jsonl) for everything that happened since the
    last tick: state changes, generation boundaries, long waits, a job that ended while its
    experiment is unfinished (with the resume command), conflicts, scheduler or storage
    errors."""
    return await call(
        ctx, roots, "slurm watch", workspace=workspace, pending_after=pending_after, once=True
    )


@tool("slurm watch register")
async def register_slurm_watch(
    job_id: JobId, experiment_id: ExperimentId, workspace: Workspace, ctx: Context, roots: Roots
) -> Reply[Registration]:
    """Adopt an existing SLURM job as the controller of an experiment of the workspace, so
    that watch_slurm ticks over it. Refused, naming both sides: the job registered for another
    experiment, a second live job for the same experiment, a job of another user."""
    return await call(
        ctx,
        roots,
        "slurm watch register",
        job_id=job_id,
        experiment_id=experiment_id,
        workspace=workspace,
    )
