"""`automl-setup-mcp`: the MCP face. Every tool builds the request of its operation
(`mcp_server.operations`), calls it, and returns its result with the text the CLI prints for it;
this module only maps inputs, the branch question and replies onto the protocol (the runtime:
progress, errors, shutdown, is mcp_runtime.py).

stdout carries JSON-RPC only: the SDK's stdio transport points fd 1 at stderr while it serves,
the core sends git, uv and engine output to log files or captures it, and logging goes to stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.mcpserver import Context, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field

from mcp_server import __version__, operations
from mcp_server.environment.diagnose import Diagnosis
from mcp_server.environment.install import STEPS, InstallResult
from mcp_server.experiments.started import StartedEngine
from mcp_server.experiments.status import ExperimentListing, ExperimentStatus
from mcp_server.faces import messages
from mcp_server.faces.mcp_inputs import (
    Branch,
    BranchChoice,
    Commit,
    ExperimentId,
    Extra,
    Manifest,
    ProfileOption,
    Python,
    Workspace,
    ask_branch,
    chosen_branch,
    engine_profile,
)
from mcp_server.faces.mcp_resources import StartedResources, register, started_resources
from mcp_server.faces.mcp_roots import Roots, check_roots
from mcp_server.faces.mcp_runtime import (
    MonotonicProgress,
    RedactingFormatter,
    forbid_unknown_arguments,
    hints,
    reap,
    run,
    serve,
    serve_in_own_session,
    worker_progress,
)
from mcp_server.requests import (
    DiagnoseQuery,
    HistoryQuery,
    InstallRequest,
    LaunchRequest,
    ListQuery,
    ProvenanceQuery,
    RepairRequest,
    ResolveRequest,
    ResumeRequest,
    StatusQuery,
)

INSTRUCTIONS = """\
Installs an AutoML core engine from source at an exact commit, verifies and records it, and runs
experiments bound to that exact build. Before install_engine, ask the user: "main, or which
development branch?" - never choose a branch yourself (the tool asks the user itself when the
client supports elicitation). Pass absolute paths. Resume takes the exact experiment id (see
list_experiments). A tool error is a refusal with its cause and remedy: read it, do not retry
blindly."""

server = MCPServer("automl-setup", version=__version__, instructions=INSTRUCTIONS)

# --------------------------------------------------------------------------------------------
# Replies: an operation's result plus the text the command line prints for it.

Message = Annotated[str, Field(description="The text `automl-setup` prints for the same call.")]


class BranchResolutionReply(operations.BranchResolution):
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


class StartedReply(StartedEngine, StartedResources):
    message: Message


class StatusReply(ExperimentStatus):
    message: Message


class ListReply(ExperimentListing):
    message: Message


ReplyT = TypeVar("ReplyT", bound=BaseModel)


def _reply(cls: type[ReplyT], operation: str, result: BaseModel, **extra: Any) -> ReplyT:
    return cls.model_validate(
        {**result.model_dump(), **extra, "message": messages.render(operation, result)}
    )


# The hints of the tools that only read local files and processes: safe to call any time.
LOCAL_READ = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}

# --------------------------------------------------------------------------------------------
# Tools: one per operation, named after its command (operations.OPERATIONS)


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
        result = operations.resolve(ResolveRequest(profile=engine_profile(profile), branch=branch))
        return _reply(BranchResolutionReply, "resolve", result)

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
    create_env: Annotated[
        bool, Field(strict=True, description="Create the virtual environment if it is missing.")
    ] = False,
    extras: Annotated[tuple[Extra, ...], Field(max_length=16, description="Engine extras.")] = (),
    profile: ProfileOption = None,
) -> InstallReply:
    """Install the engine from source at an exact commit into `python`: resolve, fetch, build
    a reproducible wheel, check it, install it, verify it against RECORD, and record it.
    Without branch or commit the user is asked "main, or which development branch?". On any
    failure the previous engine and its record stay exactly as they were."""
    chosen = chosen_branch(asked)
    tracker = MonotonicProgress(ctx, STEPS)

    def work() -> InstallReply:
        check_roots(roots, python=python, profile_file=profile and profile.file)
        request = InstallRequest(
            profile=engine_profile(profile),
            python=python,
            branch=chosen,
            commit=commit,
            create_env=create_env,
            extras=extras,
        )
        result = operations.install(request, worker_progress(tracker))
        return _reply(InstallReply, "install", result)

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
) -> ProvenanceReply:
    """Verify the engine installed in `python` against its record (direct_url.json commit,
    RECORD hashes, identity digest); with experiment_id and workspace, also compare it field by
    field with the exact build that experiment is bound to."""

    def work() -> ProvenanceReply:
        check_roots(
            roots, python=python, workspace=workspace, profile_file=profile and profile.file
        )
        query = ProvenanceQuery(
            profile=engine_profile(profile),
            python=python,
            experiment_id=experiment_id,
            workspace=workspace,
        )
        return _reply(ProvenanceReply, "verify", operations.verify(query))

    return await run(ctx, work)


@server.tool(**hints("Diagnose the engine installation", **LOCAL_READ))
async def diagnose_engine(
    python: Python, ctx: Context, roots: Roots, profile: ProfileOption = None
) -> DiagnosisReply:
    """Explain what is (not) installed in `python`: the core engine, look-alike packages that do
    not provide it, the state of its record, and the commands that install it from source."""

    def work() -> DiagnosisReply:
        check_roots(roots, python=python, profile_file=profile and profile.file)
        result = operations.diagnose(DiagnoseQuery(profile=engine_profile(profile), python=python))
        return _reply(DiagnosisReply, "diagnose", result)

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
        return _reply(RepairReply, "repair", operations.repair(RepairRequest(python=python)))

    return await run(ctx, work)


@server.tool(**hints("Install history of an environment", **LOCAL_READ))
async def history_engine(python: Python, ctx: Context, roots: Roots) -> HistoryReply:
    """Every install of the engine into the environment and every rollback, oldest first."""

    def work() -> HistoryReply:
        check_roots(roots, python=python)
        return _reply(HistoryReply, "history", operations.history(HistoryQuery(python=python)))

    return await run(ctx, work)


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
        return _reply(StartedReply, "launch", started, **resources)

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
        return _reply(StartedReply, "resume", started, **resources)

    return await run(ctx, work)


@server.tool(**hints("Experiment status", **LOCAL_READ))
async def status_experiment(
    experiment_id: ExperimentId, workspace: Workspace, ctx: Context, roots: Roots
) -> StatusReply:
    """State, trials done, best trial and bound engine of one experiment, read from its ledger."""

    def work() -> StatusReply:
        check_roots(roots, workspace=workspace)
        query = StatusQuery(experiment_id=experiment_id, workspace=workspace)
        return _reply(StatusReply, "status", operations.status(query))

    return await run(ctx, work)


@server.tool(**hints("List experiments", **LOCAL_READ))
async def list_experiments(workspace: Workspace, ctx: Context, roots: Roots) -> ListReply:
    """Every experiment launched by automl-setup in the workspace, with its status."""

    def work() -> ListReply:
        check_roots(roots, workspace=workspace)
        listing = operations.list_experiments(ListQuery(workspace=workspace))
        return _reply(ListReply, "list", listing)

    return await run(ctx, work)


forbid_unknown_arguments(server)
register(server)  # the resource templates (faces/mcp_resources.py)


# --------------------------------------------------------------------------------------------
# Entry point


def main() -> int:
    """Serve over stdio: `automl-setup-mcp`, or `automl-setup mcp`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # force: constructing MCPServer already configured the root logger at import time.
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    status = serve_in_own_session()
    if status is not None:
        return status
    try:
        anyio.run(serve, server)
    except KeyboardInterrupt:  # before the signal handlers are in place
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
