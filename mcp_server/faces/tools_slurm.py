"""MCP tools of the SLURM controller: submit_slurm_job, status_slurm_job, cancel_slurm_job (the
operations `slurm submit`, `slurm status`, `slurm cancel`)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.faces.mcp_app import Reply, call, tool
from mcp_server.faces.mcp_inputs import ExperimentId, Manifest, Python, Workspace
from mcp_server.faces.mcp_roots import Roots
from mcp_server.slurm.control import CancelledJob, SlurmStatus
from mcp_server.slurm.requests import (
    DEFAULT_MAX_ALLOCATIONS,
)
from mcp_server.slurm.submit import SubmittedController

MaxAllocations = Annotated[
    str,
    Field(
        min_length=1,
        max_length=40,
        description="Allocations in all, the first included (3: generations 0, 1, 2).",
    ),
]
TimeLimit = Annotated[
    str | None, Field(max_length=20, description="SLURM time limit: 30, 2:00:00, 1-12.")
]
Partition = Annotated[str | None, Field(max_length=64, description="SLURM partition.")]
SbatchArgs = Annotated[
    list[Annotated[str, Field(max_length=200)]],
    Field(max_length=32, description="Extra sbatch options, each `--name` or `--name=value`."),
]


@tool("slurm submit")
async def submit_slurm_job(
    manifest: Manifest,
    workspace: Workspace,
    python: Python,
    ctx: Context,
    roots: Roots,
    max_allocations: MaxAllocations = DEFAULT_MAX_ALLOCATIONS,
    time: TimeLimit = None,
    partition: Partition = None,
    sbatch_args: SbatchArgs | None = None,
) -> Reply[SubmittedController]:
    """Bind a new experiment to the verified engine in `python` exactly as launch_experiment
    does, render its controller batch script into the experiment folder and submit it with
    sbatch. Ask the user for the partition, time limit and allocation cap, and for their yes,
    before calling this. Follow it with status_slurm_job."""
    return await call(
        ctx,
        roots,
        "slurm submit",
        manifest=manifest,
        workspace=workspace,
        python=python,
        max_allocations=max_allocations,
        time=time,
        partition=partition,
        sbatch_args=tuple(sbatch_args or ()),
    )


@tool("slurm status")
async def status_slurm_job(
    experiment_id: ExperimentId, workspace: Workspace, ctx: Context, roots: Roots
) -> Reply[SlurmStatus]:
    """The experiment's SLURM job: scheduler state (fixed vocabulary, with the pending
    reason), generation (restart count), trials done and the newest attempts ledger entry."""
    return await call(ctx, roots, "slurm status", experiment_id=experiment_id, workspace=workspace)


@tool("slurm cancel")
async def cancel_slurm_job(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    approve: Annotated[bool, Field(description="The user said yes to cancelling.")] = False,
) -> Reply[CancelledJob]:
    """Cancel the experiment's SLURM job (scancel). Needs approve=true, given only after the
    user said yes; the reply carries the command that resumes the experiment later."""
    return await call(
        ctx,
        roots,
        "slurm cancel",
        experiment_id=experiment_id,
        workspace=workspace,
        approve=approve,
    )
