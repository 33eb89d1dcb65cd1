"""MCP tools of the engine: resolve, install, verify, diagnose, repair, history (one per
operation of `operations.OPERATIONS`, named after its command)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, ElicitationResult, Resolve
from pydantic import Field

from mcp_server import operations
from mcp_server.environment.diagnose import Diagnosis
from mcp_server.environment.install import STEPS, InstallResult
from mcp_server.faces.mcp_app import LOCAL_READ, Message, reply, server
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
    engine_profile,
)
from mcp_server.faces.mcp_roots import Roots, check_roots
from mcp_server.faces.mcp_runtime import MonotonicProgress, hints, run, worker_progress
from mcp_server.requests import (
    BranchesQuery,
    DiagnoseQuery,
    HistoryQuery,
    InstallRequest,
    ProvenanceQuery,
    RepairRequest,
    ResolveRequest,
)
from mcp_server.source.branches import BranchListing


class BranchResolutionReply(operations.BranchResolution):
    message: Message


class BranchListingReply(BranchListing):
    message: Message


class InstallReply(InstallResult):
    message: Message


class ProvenanceReply(operations.ProvenanceReport):
    message: Message


class DiagnosisReply(Diagnosis):
    message: Message


class RepairReply(operations.RepairResult):
    message: Message


class HistoryReply(operations.InstallHistory):
    message: Message


@server.tool(
    **hints(
        "Resolve a branch to a commit",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=True,
    )
)
async def resolve_branch(
    branch: Branch, ctx: Context, roots: Roots, profile: ProfileOption = None
) -> BranchResolutionReply:
    """Resolve exactly refs/heads/<branch> of the engine repository to a full commit id (a tag
    or a missing branch is an error). Installs nothing; show the user the commit."""

    def work() -> BranchResolutionReply:
        check_roots(roots, profile_file=profile and profile.file)
        request = ResolveRequest(profile=engine_profile(profile, roots), branch=branch)
        result = operations.resolve(request)
        return reply(BranchResolutionReply, "resolve", result)

    return await run(ctx, work)


@server.tool(
    **hints(
        "List the engine repository's branches",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=True,
    )
)
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
) -> BranchListingReply:
    """List the branches (refs/heads/*) of the engine repository with their commits, to offer
    the user real choices; the user picks one, never you. Installs nothing."""

    def work() -> BranchListingReply:
        check_roots(roots, profile_file=profile and profile.file)
        query = BranchesQuery(
            profile=engine_profile(profile, roots), with_subdirectory=with_subdirectory
        )
        return reply(BranchListingReply, "branches", operations.branches(query))

    return await run(ctx, work)


@server.tool(
    **hints(
        "Install the engine from source",
        read_only=False,
        destructive=True,  # replaces the engine installed in the environment
        idempotent=False,  # a branch may have moved since the last call
        open_world=True,  # fetches from the repository
    )
)
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
) -> InstallReply:
    """Install the engine from source at an exact commit into `python`: resolve, fetch, build
    a reproducible wheel, check it, install it, verify it against RECORD, and record it. Or,
    with wheel and sha256, install that reviewed wheel exactly (origin reviewed-wheel).
    Without branch, commit or wheel the user is asked "main, or which development branch?". Pass the
    commit the user confirmed as expect_commit with the branch. On any failure the previous
    engine and its record stay exactly as they were."""
    chosen = chosen_branch(asked)
    tracker = MonotonicProgress(ctx, STEPS)

    def work() -> InstallReply:
        check_roots(roots, python=python, profile_file=profile and profile.file, wheel=wheel)
        request = InstallRequest(
            profile=engine_profile(profile, roots),
            python=python,
            branch=chosen,
            commit=commit,
            expect_commit=expect_commit,
            create_env=create_env,
            extras=extras,
            wheel=wheel,
            sha256=sha256,
            require_pinned=require_pinned,
        )
        result = operations.install(request, worker_progress(tracker))
        return reply(InstallReply, "install", result)

    return await run(ctx, work, tracker)


@server.tool(**hints("Verify the engine against its record", **LOCAL_READ))
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
) -> ProvenanceReply:
    """Verify the engine installed in `python` against its record (direct_url.json commit,
    RECORD hashes, identity digest); with experiment_id and workspace, also compare it field by
    field with the exact build that experiment is bound to."""

    def work() -> ProvenanceReply:
        check_roots(
            roots, python=python, workspace=workspace, profile_file=profile and profile.file
        )
        query = ProvenanceQuery(
            profile=engine_profile(profile, roots),
            python=python,
            experiment_id=experiment_id,
            workspace=workspace,
            deep=deep,
        )
        return reply(ProvenanceReply, "verify", operations.verify(query))

    return await run(ctx, work)


@server.tool(**hints("Diagnose the engine installation", **LOCAL_READ))
async def diagnose_engine(
    python: Python, ctx: Context, roots: Roots, profile: ProfileOption = None
) -> DiagnosisReply:
    """Explain what is (not) installed in `python`: the core engine, look-alike packages that do
    not provide it, the state of its record, and the commands that install it from source."""

    def work() -> DiagnosisReply:
        check_roots(roots, python=python, profile_file=profile and profile.file)
        query = DiagnoseQuery(profile=engine_profile(profile, roots), python=python)
        result = operations.diagnose(query)
        return reply(DiagnosisReply, "diagnose", result)

    return await run(ctx, work)


@server.tool(
    **hints(
        "Repair an interrupted install",
        read_only=False,
        destructive=True,  # rolls the environment back to the engine before the install
        idempotent=True,  # a second call finds nothing to repair
        open_world=False,
    )
)
async def repair_engine(python: Python, ctx: Context, roots: Roots) -> RepairReply:
    """Roll back an install into `python` that was killed halfway (or finish one whose record
    was already written), so the previous engine is back exactly; says so when there is
    nothing to repair. Refused while an install is running."""

    def work() -> RepairReply:
        check_roots(roots, python=python)
        return reply(RepairReply, "repair", operations.repair(RepairRequest(python=python)))

    return await run(ctx, work)


@server.tool(**hints("Install history of an environment", **LOCAL_READ))
async def history_engine(python: Python, ctx: Context, roots: Roots) -> HistoryReply:
    """Every install of the engine into the environment and every rollback, oldest first."""

    def work() -> HistoryReply:
        check_roots(roots, python=python)
        return reply(HistoryReply, "history", operations.history(HistoryQuery(python=python)))

    return await run(ctx, work)
