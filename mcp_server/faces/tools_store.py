"""MCP tools of the wheel store and of recreating a bound engine: store_wheels, recreate_engine
(one per operation of `operations.OPERATIONS`, named after its command)."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.environment.install import STEPS
from mcp_server.experiments import recreate
from mcp_server.experiments.lock import LockQuery, LockResult
from mcp_server.experiments.lock import lock_experiment as make_lock
from mcp_server.experiments.recreate import RecreateRequest, RecreateResult
from mcp_server.experiments.storeops import StoreReport, StoreRequest, run_store
from mcp_server.faces.mcp_app import Message, reply, server
from mcp_server.faces.mcp_inputs import ExperimentId, LockOut, Python, Workspace
from mcp_server.faces.mcp_roots import Roots, check_roots
from mcp_server.faces.mcp_runtime import MonotonicProgress, hints, run, worker_progress


class StoreReply(StoreReport):
    message: Message


class RecreateReply(RecreateResult):
    message: Message


class LockReply(LockResult):
    message: Message


@server.tool(
    **hints(
        "List, verify, keep into or garbage-collect the wheel store",
        read_only=False,  # keep adds entries, gc removes them
        destructive=True,  # gc removes every wheel no binding in keep_bound refers to
        idempotent=True,
        open_world=False,
    )
)
async def store_wheels(
    action: Literal["list", "verify", "keep", "gc"],
    ctx: Context,
    roots: Roots,
    keep_bound: Annotated[
        tuple[Workspace, ...],
        Field(max_length=64, description="gc only: workspaces whose bound wheels are kept."),
    ] = (),
    experiment_id: ExperimentId | None = None,
    workspace: Workspace | None = None,
) -> StoreReply:
    """The content-addressed wheel store: list its entries, verify every entry's bytes against
    its sha256, keep (with experiment_id and workspace) every member of the experiment's bound
    dependency closure, packed from the environment that holds it, so recreate_engine needs
    no index or repository; or gc: remove every wheel no binding in the keep_bound workspaces
    refers to."""

    def work() -> StoreReply:
        for kept in (*keep_bound, *([workspace] if workspace else [])):
            check_roots(roots, workspace=kept)
        request = StoreRequest(
            action=action, keep_bound=keep_bound, experiment_id=experiment_id, workspace=workspace
        )
        return reply(StoreReply, "store", run_store(request))

    return await run(ctx, work)


@server.tool(
    **hints(
        "Recreate an experiment's bound engine",
        read_only=False,
        destructive=False,  # installs into a separate environment only
        idempotent=True,  # a second call finds the engine installed, unchanged
        open_world=True,  # may fetch the bound commit when the store lacks the wheel
    )
)
async def recreate_engine(
    experiment_id: ExperimentId,
    workspace: Workspace,
    python: Python,
    ctx: Context,
    roots: Roots,
    create_env: Annotated[
        bool, Field(strict=True, description="Create the virtual environment if it is missing.")
    ] = False,
) -> RecreateReply:
    """Install exactly the engine build the experiment is bound to into the separate
    environment `python`: from the wheel store (offline) or by rebuilding the bound commit
    (refused unless the wheel's sha256 is the bound one); then checked field by field against
    the binding, so resume_experiment with that python is accepted."""
    tracker = MonotonicProgress(ctx, STEPS)

    def work() -> RecreateReply:
        check_roots(roots, python=python, workspace=workspace)
        request = RecreateRequest(
            experiment_id=experiment_id, workspace=workspace, python=python, create_env=create_env
        )
        result = recreate.recreate_engine(request, worker_progress(tracker))
        return reply(RecreateReply, "recreate", result)

    return await run(ctx, work, tracker)


@server.tool(
    **hints(
        "Write a PEP 751 lock of an experiment's bound closure",
        read_only=False,  # writes one new pylock.toml
        destructive=False,  # never overwrites: an existing file with other bytes is refused
        idempotent=True,  # the same binding and index give the same file
        open_world=True,  # uv asks the index for each bound version's files and hashes
    )
)
async def lock_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    out: LockOut | None = None,
) -> LockReply:
    """Write the closure the experiment is bound to as a PEP 751 pylock.toml (the engine by
    its stored wheel and sha256, every dependency at its bound version or commit), which
    `uv pip sync` installs into a new environment."""

    def work() -> LockReply:
        check_roots(roots, workspace=workspace, out=out)
        query = LockQuery(experiment_id=experiment_id, workspace=workspace, out=out)
        return reply(LockReply, "lock", make_lock(query))

    return await run(ctx, work)
