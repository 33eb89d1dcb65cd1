"""MCP tools of the wheel store and of recreating a bound engine: store_wheels, recreate_engine
(one per operation, named, titled and annotated by its row in `faces/registry.py`)."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.environment.install import STEPS
from mcp_server.experiments.lock import LockResult
from mcp_server.experiments.recreate import RecreateResult
from mcp_server.experiments.storeops import StoreReport
from mcp_server.faces.mcp_app import Reply, call, tool
from mcp_server.faces.mcp_inputs import ExperimentId, LockOut, Python, Workspace
from mcp_server.faces.mcp_roots import Roots
from mcp_server.faces.mcp_runtime import MonotonicProgress


@tool("store")
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
) -> Reply[StoreReport]:
    """The content-addressed wheel store: list its entries, verify every entry's bytes against
    its sha256, keep (with experiment_id and workspace) every member of the experiment's bound
    dependency closure, packed from the environment that holds it, so recreate_engine needs
    no index or repository; or gc: remove every wheel no binding in the keep_bound workspaces
    refers to."""
    return await call(
        ctx,
        roots,
        "store",
        action=action,
        keep_bound=keep_bound,
        experiment_id=experiment_id,
        workspace=workspace,
    )


@tool("recreate")
async def recreate_engine(
    experiment_id: ExperimentId,
    workspace: Workspace,
    python: Python,
    ctx: Context,
    roots: Roots,
    create_env: Annotated[
        bool, Field(strict=True, description="Create the virtual environment if it is missing.")
    ] = False,
) -> Reply[RecreateResult]:
    """Install exactly the engine build the experiment is bound to into the separate
    environment `python`: from the wheel store (offline) or by rebuilding the bound commit
    (refused unless the wheel's sha256 is the bound one); then checked field by field against
    the binding, so resume_experiment with that python is accepted."""
    return await call(
        ctx,
        roots,
        "recreate",
        tracker=MonotonicProgress(ctx, STEPS),
        experiment_id=experiment_id,
        workspace=workspace,
        python=python,
        create_env=create_env,
    )


@tool("lock")
async def lock_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    out: LockOut | None = None,
) -> Reply[LockResult]:
    """Write the closure the experiment is bound to as a PEP 751 pylock.toml (the engine by
    its stored wheel and sha256, every dependency at its bound version or commit), which
    `uv pip sync` installs into a new environment."""
    return await call(ctx, roots, "lock", experiment_id=experiment_id, workspace=workspace, out=out)
