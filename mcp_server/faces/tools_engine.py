"""MCP tools of the engine: resolve, branches, install, verify, diagnose, repair, history (one
per operation, named, titled and annotated by its row in `faces/registry.py`)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, ElicitationResult, Resolve
from pydantic import Field

from mcp_server.environment.diagnose import Diagnosis
from mcp_server.environment.install import STEPS, InstallResult
from mcp_server.faces.mcp_app import Reply, call, tool
from mcp_server.faces.mcp_inputs import (
    Branch,
    BranchChoice,
    Commit,
    ExperimentId,
    Extra,
    ProfileOption,
    Python,
    Sha256,
    Wheel,
    Workspace,
    ask_branch,
    chosen_branch,
)
from mcp_server.faces.mcp_roots import Roots
from mcp_server.faces.mcp_runtime import MonotonicProgress
from mcp_server.operations import BranchResolution, InstallHistory, ProvenanceReport, RepairResult
from mcp_server.source.branches import BranchListing


@tool("resolve")
async def resolve_branch(
    branch: Branch, ctx: Context, roots: Roots, profile: ProfileOption = None
) -> Reply[BranchResolution]:
    """Resolve exactly refs/heads/<branch> of the engine repository to a full commit id (a tag
    or a missing branch is an error). Installs nothing; show the user the commit."""
    return await call(ctx, roots, "resolve", profile=profile, branch=branch)


@tool("branches")
async def list_branches(
    ctx: Context,
    roots: Roots,
    with_subdirectory: Annotated[
        bool,
        Field(
            strict=True,
            description="Only branches whose head holds the profile's subdirectory (trees are "
            "read, no file content).",
        ),
    ] = False,
    profile: ProfileOption = None,
) -> Reply[BranchListing]:
    """List the branches (refs/heads/*) of the engine repository with their commits, to offer
    the user real choices; the user picks one, never you. Installs nothing."""
    return await call(ctx, roots, "branches", profile=profile, with_subdirectory=with_subdirectory)


@tool("install")
async def install_engine(
    python: Python,
    ctx: Context,
    asked: Annotated[ElicitationResult[BranchChoice], Resolve(ask_branch)],
    roots: Roots,
    branch: Annotated[
        Branch | None, Field(description="Branch to install; omit both this and commit to ask.")
    ] = None,
    commit: Annotated[Commit | None, Field(description="Full commit id to install.")] = None,
    expect_commit: Annotated[
        Commit | None,
        Field(
            description="With branch: the commit the user confirmed (from resolve_branch); "
            "refused, changing nothing, when the branch no longer points at it."
        ),
    ] = None,
    create_env: Annotated[
        bool, Field(strict=True, description="Create the virtual environment if it is missing.")
    ] = False,
    extras: Annotated[tuple[Extra, ...], Field(max_length=16, description="Engine extras.")] = (),
    profile: ProfileOption = None,
    wheel: Wheel | None = None,
    sha256: Sha256 | None = None,
    require_pinned: Annotated[
        bool,
        Field(
            strict=True,
            description="Refuse, changing nothing, an engine whose dependency closure resolves a "
            "moving reference (a VCS or URL requirement naming no commit).",
        ),
    ] = False,
) -> Reply[InstallResult]:
    """Install the engine from source at an exact commit into `python`: resolve, fetch, build
    a reproducible wheel, check it, install it, verify it against RECORD, and record it. Or,
    with wheel and sha256, install that reviewed wheel exactly (origin reviewed-wheel).
    Without branch, commit or wheel the user is asked "main, or which development branch?". Pass the
    commit the user confirmed as expect_commit with the branch. On any failure the previous
    engine and its record stay exactly as they were."""
    return await call(
        ctx,
        roots,
        "install",
        tracker=MonotonicProgress(ctx, STEPS),
        profile=profile,
        python=python,
        branch=chosen_branch(asked),
        commit=commit,
        expect_commit=expect_commit,
        create_env=create_env,
        extras=extras,
        wheel=wheel,
        sha256=sha256,
        require_pinned=require_pinned,
    )


@tool("verify")
async def verify_engine(
    python: Python,
    ctx: Context,
    roots: Roots,
    experiment_id: Annotated[
        ExperimentId | None,
        Field(description="Also compare the engine with this experiment's binding."),
    ] = None,
    workspace: Annotated[Workspace | None, Field(description="Workspace of experiment_id.")] = None,
    profile: ProfileOption = None,
    deep: Annotated[
        bool,
        Field(
            strict=True,
            description="Also hash every file of the engine's dependency closure against its "
            "RECORD, naming each edited file (slower: reads them all).",
        ),
    ] = False,
) -> Reply[ProvenanceReport]:
    """Verify the engine installed in `python` against its record (direct_url.json commit,
    RECORD hashes, identity digest); with experiment_id and workspace, also compare it field by
    field with the exact build that experiment is bound to."""
    return await call(
        ctx,
        roots,
        "verify",
        profile=profile,
        python=python,
        experiment_id=experiment_id,
        workspace=workspace,
        deep=deep,
    )


@tool("diagnose")
async def diagnose_engine(
    python: Python, ctx: Context, roots: Roots, profile: ProfileOption = None
) -> Reply[Diagnosis]:
    """Explain what is (not) installed in `python`: the core engine, look-alike packages that do
    not provide it, the state of its record, and the commands that install it from source."""
    return await call(ctx, roots, "diagnose", profile=profile, python=python)


@tool("repair")
async def repair_engine(python: Python, ctx: Context, roots: Roots) -> Reply[RepairResult]:
    """Roll back an install into `python` that was killed halfway (or finish one whose record
    was already written), so the previous engine is back exactly; says so when there is
    nothing to repair. Refused while an install is running."""
    return await call(ctx, roots, "repair", python=python)


@tool("history")
async def history_engine(python: Python, ctx: Context, roots: Roots) -> Reply[InstallHistory]:
    """Every install of the engine into the environment and every rollback, oldest first."""
    return await call(ctx, roots, "history", python=python)
