"""MCP tools of experiments: launch, resume, status, list, stop, logs (one per operation, named,
titled and annotated by its row in `faces/registry.py`)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.experiments.control import StopResult
from mcp_server.experiments.logs import LogTail
from mcp_server.experiments.started import StartedEngine
from mcp_server.experiments.status import ExperimentListing, ExperimentStatus
from mcp_server.faces.mcp_app import Reply, call, tool
from mcp_server.faces.mcp_inputs import ExperimentId, Manifest, Python, Workspace
from mcp_server.faces.mcp_resources import StartedResources, started_resources
from mcp_server.faces.mcp_roots import Roots
from mcp_server.faces.mcp_runtime import reap


def started_reply(request: Any, started: StartedEngine) -> dict[str, Any]:
    """A detached engine is reaped by the server (which outlives it); its reply adds the
    resource URIs of the started attempt."""
    reap(started.pid)
    return started_resources(started, request.workspace)


@tool("launch")
async def launch_experiment(
    manifest: Manifest, workspace: Workspace, python: Python, ctx: Context, roots: Roots
) -> Reply[StartedEngine, StartedResources]:
    """Start a new experiment bound to the verified engine in `python`, detached. Returns at
    once with the engine's pid, log path and binding path; follow it with status_experiment."""
    return await call(
        ctx,
        roots,
        "launch",
        after=started_reply,
        extra=StartedResources,
        manifest=manifest,
        workspace=workspace,
        python=python,
        detach=True,
    )


@tool("resume")
async def resume_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    manifest: Annotated[Manifest, Field(description="The manifest the experiment started with.")],
    python: Python,
    ctx: Context,
    roots: Roots,
) -> Reply[StartedEngine, StartedResources]:
    """Resume the experiment with exactly this id on exactly the engine build it is bound to,
    detached. Any difference refuses with the field-level diff and the commands that recreate
    the bound engine in a separate environment; nothing is installed or upgraded."""
    return await call(
        ctx,
        roots,
        "resume",
        after=started_reply,
        extra=StartedResources,
        experiment_id=experiment_id,
        workspace=workspace,
        manifest=manifest,
        python=python,
        detach=True,
    )


@tool("status")
async def status_experiment(
    experiment_id: ExperimentId, workspace: Workspace, ctx: Context, roots: Roots
) -> Reply[ExperimentStatus]:
    """State, trials done, best trial and bound engine of one experiment, read from its ledger."""
    return await call(ctx, roots, "status", experiment_id=experiment_id, workspace=workspace)


@tool("list")
async def list_experiments(
    workspace: Workspace, ctx: Context, roots: Roots
) -> Reply[ExperimentListing]:
    """Every experiment launched by automl-setup in the workspace, with its status."""
    return await call(ctx, roots, "list", workspace=workspace)


@tool("stop")
async def stop_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    kill: Annotated[
        bool,
        Field(strict=True, description="SIGKILL it if it still runs after the grace period."),
    ] = False,
    grace: Annotated[
        float, Field(ge=0, le=3600, description="Seconds to wait after SIGTERM.")
    ] = 30.0,
) -> Reply[StopResult]:
    """SIGTERM to the engine automl-setup started for this experiment (checked by pid and
    start time: a reused pid is never signalled), then wait up to `grace` seconds for it to
    save and exit, and report what its ledger says. resume_experiment continues it."""
    return await call(
        ctx, roots, "stop", experiment_id=experiment_id, workspace=workspace, kill=kill, grace=grace
    )


@tool("logs")
async def logs_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    attempt: Annotated[
        int | None, Field(ge=1, description="Attempt number; omit both for the last attempt.")
    ] = None,
    trial: Annotated[int | None, Field(ge=0, description="Trial index (from 0).")] = None,
) -> Reply[LogTail]:
    """The last 64 KiB of the engine output of one attempt (the last one by default) or of
    one trial, credentials masked: read it to see why something failed."""
    return await call(
        ctx,
        roots,
        "logs",
        experiment_id=experiment_id,
        workspace=workspace,
        attempt=attempt,
        trial=trial,
    )
