"""MCP tools of the SLURM controller: submit_slurm_job, status_slurm_job, cancel_slurm_job (the
operations `slurm submit`, `slurm status`, `slurm cancel`)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.faces.mcp_app import Message, reply, server
from mcp_server.faces.mcp_inputs import ExperimentId, Manifest, Python, Workspace
from mcp_server.faces.mcp_roots import Roots, check_roots
from mcp_server.faces.mcp_runtime import hints, run
from mcp_server.slurm.control import CancelledJob, SlurmStatus, slurm_cancel, slurm_status
from mcp_server.slurm.requests import (
    DEFAULT_MAX_ALLOCATIONS,
    CancelRequest,
    SlurmStatusQuery,
    SubmitRequest,
)
from mcp_server.slurm.submit import SubmittedController, submit_controller

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


class SubmitReply(SubmittedController):
    message: Message


class SlurmStatusReply(SlurmStatus):
    message: Message


class CancelReply(CancelledJob):
    message: Message


@server.tool(
    **hints(
        "Submit an experiment to SLURM",
        read_only=False,  # binds a new experiment and submits a job
        destructive=False,  # an existing experiment id is refused, never replaced
        idempotent=False,  # each call submits a job
        open_world=True,  # the SLURM scheduler
    )
)
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
) -> SubmitReply:
    """Bind a new experiment to the verified engine in `python` exactly as launch_experiment
    does, render its controller batch script into the experiment folder and submit it with
    sbatch. Ask the user for the partition, time limit and allocation cap, and for their yes,
    before calling this. Follow it with status_slurm_job."""

    def work() -> SubmitReply:
        check_roots(roots, python=python, workspace=workspace, manifest=manifest)
        request = SubmitRequest(
            manifest=manifest,
            workspace=workspace,
            python=python,
            max_allocations=max_allocations,
            time=time,
            partition=partition,
            sbatch_args=tuple(sbatch_args or ()),
        )
        return reply(SubmitReply, "slurm submit", submit_controller(request))

    return await run(ctx, work)


@server.tool(
    **hints(
        "SLURM job of an experiment",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=True,  # asks the SLURM scheduler
    )
)
async def status_slurm_job(
    experiment_id: ExperimentId, workspace: Workspace, ctx: Context, roots: Roots
) -> SlurmStatusReply:
    """The experiment's SLURM job: scheduler state (fixed vocabulary, with the pending
    reason), generation (restart count), trials done and the newest attempts ledger entry."""

    def work() -> SlurmStatusReply:
        check_roots(roots, workspace=workspace)
        query = SlurmStatusQuery(experiment_id=experiment_id, workspace=workspace)
        return reply(SlurmStatusReply, "slurm status", slurm_status(query))

    return await run(ctx, work)


@server.tool(
    **hints(
        "Cancel the SLURM job of an experiment",
        read_only=False,
        destructive=True,  # ends the job; the experiment's state is saved and resumable
        idempotent=False,
        open_world=True,
    )
)
async def cancel_slurm_job(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    approve: Annotated[bool, Field(description="The user said yes to cancelling.")] = False,
) -> CancelReply:
    """Cancel the experiment's SLURM job (scancel). Needs approve=true, given only after the
    user said yes; the reply carries the command that resumes the experiment later."""

    def work() -> CancelReply:
        check_roots(roots, workspace=workspace)
        request = CancelRequest(experiment_id=experiment_id, workspace=workspace, approve=approve)
        return reply(CancelReply, "slurm cancel", slurm_cancel(request))

    return await run(ctx, work)
