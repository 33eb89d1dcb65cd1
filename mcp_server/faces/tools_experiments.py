"""MCP tools of experiments: launch, resume, status, list (one per operation of
`operations.OPERATIONS`, named after its command)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server import operations

# The operations of these two tools (their rows in operations.OPERATIONS point here).
from mcp_server.experiments.control import StopResult
from mcp_server.experiments.control import stop_experiment as stop_experiment_op
from mcp_server.experiments.logs import LogTail, experiment_log
from mcp_server.experiments.started import StartedEngine
from mcp_server.experiments.status import ExperimentListing, ExperimentStatus
from mcp_server.faces.mcp_app import LOCAL_READ, Message, reply, server
from mcp_server.faces.mcp_inputs import ExperimentId, Manifest, Python, Workspace
from mcp_server.faces.mcp_resources import StartedResources, started_resources
from mcp_server.faces.mcp_roots import Roots, check_roots
from mcp_server.faces.mcp_runtime import hints, reap, run
from mcp_server.requests import (
    LaunchRequest,
    ListQuery,
    LogsQuery,
    ResumeRequest,
    StatusQuery,
    StopRequest,
)


class StartedReply(StartedEngine, StartedResources):
    message: Message


class StatusReply(ExperimentStatus):
    message: Message


class ListReply(ExperimentListing):
    message: Message


class StopReply(StopResult):
    message: Message


class LogsReply(LogTail):
    message: Message


@server.tool(
    **hints(
        "Launch an experiment",
        read_only=False,
        destructive=False,  # creates a new experiment; an existing id is refused, never replaced
        idempotent=False,  # each call starts an engine process
        open_world=False,
    )
)
async def launch_experiment(
    manifest: Manifest, workspace: Workspace, python: Python, ctx: Context, roots: Roots
) -> StartedReply:
    """Start a new experiment bound to the verified engine in `python`, detached. Returns at
    once with the engine's pid, log path and binding path; follow it with status_experiment."""

    def work() -> StartedReply:
        check_roots(roots, python=python, workspace=workspace, manifest=manifest)
        request = LaunchRequest(manifest=manifest, workspace=workspace, python=python, detach=True)
        started = operations.launch(request)
        reap(started.pid)
        resources = started_resources(started, request.workspace)
        return reply(StartedReply, "launch", started, **resources)

    return await run(ctx, work)


@server.tool(
    **hints(
        "Resume an experiment on its bound engine",
        read_only=False,
        destructive=False,  # never installs or swaps anything; a mismatch refuses
        idempotent=False,  # each call starts an engine process and adds an attempt
        open_world=False,
    )
)
async def resume_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    manifest: Annotated[Manifest, Field(description="The manifest the experiment started with.")],
    python: Python,
    ctx: Context,
    roots: Roots,
) -> StartedReply:
    """Resume the experiment with exactly this id on exactly the engine build it is bound to,
    detached. Any difference refuses with the field-level diff and the commands that recreate
    the bound engine in a separate environment; nothing is installed or upgraded."""

    def work() -> StartedReply:
        check_roots(roots, python=python, workspace=workspace, manifest=manifest)
        request = ResumeRequest(
            experiment_id=experiment_id,
            workspace=workspace,
            manifest=manifest,
            python=python,
            detach=True,
        )
        started = operations.resume(request)
        reap(started.pid)
        resources = started_resources(started, request.workspace)
        return reply(StartedReply, "resume", started, **resources)

    return await run(ctx, work)


@server.tool(**hints("Experiment status", **LOCAL_READ))
async def status_experiment(
    experiment_id: ExperimentId, workspace: Workspace, ctx: Context, roots: Roots
) -> StatusReply:
    """State, trials done, best trial and bound engine of one experiment, read from its ledger."""

    def work() -> StatusReply:
        check_roots(roots, workspace=workspace)
        query = StatusQuery(experiment_id=experiment_id, workspace=workspace)
        return reply(StatusReply, "status", operations.status(query))

    return await run(ctx, work)


@server.tool(**hints("List experiments", **LOCAL_READ))
async def list_experiments(workspace: Workspace, ctx: Context, roots: Roots) -> ListReply:
    """Every experiment launched by automl-setup in the workspace, with its status."""

    def work() -> ListReply:
        check_roots(roots, workspace=workspace)
        listing = operations.list_experiments(ListQuery(workspace=workspace))
        return reply(ListReply, "list", listing)

    return await run(ctx, work)


@server.tool(
    **hints(
        "Stop an experiment's engine",
        read_only=False,
        destructive=True,  # ends a running engine (it saves its state; resume continues it)
        idempotent=False,  # a second call finds nothing running and is refused
        open_world=False,
    )
)
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
) -> StopReply:
    """SIGTERM to the engine automl-setup started for this experiment (checked by pid and
    start time: a reused pid is never signalled), then wait up to `grace` seconds for it to
    save and exit, and report what its ledger says. resume_experiment continues it."""

    def work() -> StopReply:
        check_roots(roots, workspace=workspace)
        request = StopRequest(
            experiment_id=experiment_id, workspace=workspace, kill=kill, grace=grace
        )
        return reply(StopReply, "stop", stop_experiment_op(request))

    return await run(ctx, work)


@server.tool(**hints("Tail of an experiment's log", **LOCAL_READ))
async def logs_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    attempt: Annotated[
        int | None, Field(ge=1, description="Attempt number; omit both for the last attempt.")
    ] = None,
    trial: Annotated[int | None, Field(ge=0, description="Trial index (from 0).")] = None,
) -> LogsReply:
    """The last 64 KiB of the engine output of one attempt (the last one by default) or of
    one trial, credentials masked: read it to see why something failed."""

    def work() -> LogsReply:
        check_roots(roots, workspace=workspace)
        query = LogsQuery(
            experiment_id=experiment_id, workspace=workspace, attempt=attempt, trial=trial
        )
        return reply(LogsReply, "logs", experiment_log(query))

    return await run(ctx, work)
