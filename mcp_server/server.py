"""`automl-setup-mcp`: the MCP face. Every tool is a thin adapter over the same core function as
the matching `automl-setup` command and shows the same message; this module only maps inputs,
errors, progress and the branch question onto the protocol.

stdout carries JSON-RPC only: the SDK's stdio transport points fd 1 at stderr while it serves,
the core sends git, uv and engine output to log files or captures it, and logging goes to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from mcp_server import __version__, diagnose, experiments, gitsource, install, messages
from mcp_server.diagnose import Diagnosis
from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.experiments import ExperimentStatus, StartedEngine, format_status
from mcp_server.gitsource import MAX_BRANCH_LENGTH, MAX_SUBDIRECTORY_LENGTH, MAX_URL_LENGTH
from mcp_server.install import STEPS, InstallRequest, InstallResult
from mcp_server.profile import EngineProfile, load_profile
from mcp_server.provenance import (
    FieldDiff,
    HistoryEntry,
    RecordStore,
    VerifyReport,
)
from mcp_server.redact import redact_text
from mcp_server.targetenv import locate

log = logging.getLogger("automl_setup.mcp")

# A heartbeat at least this often during any blocking call (the issue asks for <= 10 s).
HEARTBEAT_S = 5.0

INSTRUCTIONS = """\
Installs an AutoML core engine from source at an exact commit, verifies and records it, and runs
experiments bound to that exact build. Before install_engine, ask the user: "main, or which
development branch?" - never choose a branch yourself (the tool asks the user itself when the
client supports elicitation). Pass absolute paths. Resume takes the exact experiment id (see
list_experiments). A tool error is a refusal with its cause and remedy: read it, do not retry
blindly."""

server = MCPServer("automl-setup", version=__version__, instructions=INSTRUCTIONS)

# --------------------------------------------------------------------------------------------
# Inputs: typed and bounded here; the core validates the content (refs, URLs, ids) and its
# message is the one the agent sees.

_NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
MAX_PATH_LENGTH = 4096


def _path(description: str, default: Any = ...) -> Any:
    """A path argument: bounded, no control characters (they never name a real file)."""
    return Field(
        default,
        min_length=1,
        max_length=MAX_PATH_LENGTH,
        pattern=_NO_CONTROL,
        description=f"{description} (absolute path).",
    )


Python = Annotated[str, _path("Target Python interpreter or virtual-environment directory")]
Workspace = Annotated[str, _path("Directory that holds the experiments")]
Manifest = Annotated[str, _path("Experiment manifest, YAML or JSON")]
Branch = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_BRANCH_LENGTH,
        description="Branch name exactly as the repository has it: 'main' or a development "
        "branch such as 'dev/feature'. Never guess it: ask the user.",
    ),
]
Commit = Annotated[str, Field(min_length=1, max_length=64, description="Full commit id.")]
ExperimentId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=experiments.MAX_ID_LENGTH,
        description="Exact experiment id (search.experiment_id of its manifest).",
    ),
]
Extra = Annotated[str, Field(min_length=1, max_length=64)]


class EngineArgs(BaseModel):
    """Which engine: these fields win over `profile_file`, which wins over the default."""

    model_config = ConfigDict(extra="forbid")

    repository: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_URL_LENGTH,
        description="git URL: https://, ssh://, git@host:path or file:///path.",
    )
    subdirectory: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_SUBDIRECTORY_LENGTH,
        description="Path of the engine package inside the repository.",
    )
    distribution: str | None = Field(
        None, min_length=1, max_length=200, description="Distribution name the wheel must have."
    )
    requirement: str | None = Field(
        None, min_length=1, max_length=200, description="Version specifier, e.g. '==0.1.0'."
    )
    profile_file: str | None = _path("TOML engine profile file", None)


EngineOption = Annotated[
    EngineArgs | None,
    Field(
        description="Engine profile; omit for the default (NVIDIA-TAO/tao-automl, "
        "packages/automl-core, nvidia-automl-core ==0.1.0)."
    ),
]


def _profile(engine: EngineArgs | None) -> EngineProfile:
    engine = engine or EngineArgs()
    return load_profile(
        Path(engine.profile_file) if engine.profile_file else None,
        repository=engine.repository,
        subdirectory=engine.subdirectory,
        distribution=engine.distribution,
        requirement=engine.requirement,
    )


# --------------------------------------------------------------------------------------------
# Results: the core's models plus the text the command line prints for them.

Message = Annotated[str, Field(description="The text `automl-setup` prints for the same call.")]


class BranchResolution(BaseModel):
    repository: str = Field(description="Repository URL, credentials stripped.")
    branch: str
    ref: str = Field(description="The ref that was resolved: refs/heads/<branch>.")
    commit: str = Field(description="Full commit id the branch points at now.")
    message: Message


class InstallReply(InstallResult):
    message: Message


class DiagnosisReply(Diagnosis):
    message: Message


class StartedReply(StartedEngine):
    message: Message


class StatusReply(ExperimentStatus):
    message: Message


class BindingCheck(BaseModel):
    experiment_id: str
    binding_path: str
    bound_commit: str
    bound_identity_digest: str
    matches: bool = Field(description="True when the environment holds exactly the bound build.")
    differences: list[FieldDiff]
    recreate_commands: list[str] = Field(
        description="Commands that rebuild the bound engine in a separate environment and "
        "resume there (empty when it matches)."
    )


class ProvenanceReport(BaseModel):
    verified: bool = Field(
        description="The engine matches its record and, if an experiment was given, its binding."
    )
    environment: VerifyReport
    experiment: BindingCheck | None = None
    message: Message


class InstallHistory(BaseModel):
    environment: str
    entries: list[HistoryEntry]
    torn_line: int | None = Field(description="Line number of a torn (interrupted) write.")
    message: Message


class ExperimentList(experiments.ExperimentListing):
    message: Message


ReplyT = TypeVar("ReplyT", bound=BaseModel)


def _reply(cls: type[ReplyT], model: BaseModel, message: str) -> ReplyT:
    return cls.model_validate({**model.model_dump(), "message": message})


# --------------------------------------------------------------------------------------------
# Progress, heartbeat and the worker thread


class MonotonicProgress:
    """Progress notifications for one call. The spec wants strictly increasing values; steps
    repeat and heartbeats interleave, so every notification adds at least one unit and step k
    (0-based) of n starts at k*UNIT of n*UNIT."""

    UNIT = 1000

    def __init__(self, ctx: Context, steps: tuple[str, ...] = ()) -> None:
        self.ctx, self.steps = ctx, steps
        self.total = len(steps) * self.UNIT or None
        self.value = 0
        self.step = ""
        self.started = time.monotonic()
        # Set when the call returns or is cancelled: the work may run on in its thread, but
        # the client is told nothing more about a request it has its answer to or gave up.
        self.closed = False

    async def advance(self, step: str, message: str) -> None:
        if self.closed:
            return
        index = self.steps.index(step) if step in self.steps else 0  # "repair" comes first
        self.value = max(self.value + 1, index * self.UNIT)
        self.step = step
        await self.ctx.report_progress(
            self.value, self.total, f"[{index + 1}/{len(self.steps)} {step}] {message}"
        )

    async def heartbeat(self) -> None:
        if self.closed:
            return
        self.value += 1
        doing = f" ({self.step})" if self.step else ""
        elapsed = time.monotonic() - self.started
        await self.ctx.report_progress(
            self.value, self.total, f"still working{doing}, {elapsed:.0f} s so far"
        )

    async def finish(self) -> None:
        """The last notification of a call that succeeded: progress reaches its total."""
        if self.total is None or self.closed:
            return
        self.value = max(self.value + 1, self.total)
        try:
            await self.ctx.report_progress(self.value, self.total, "done")
        except Exception:  # the work is done; a lost notification changes nothing
            log.debug("progress notification failed", exc_info=True)


def _worker_progress(tracker: MonotonicProgress) -> Callable[[str, str], None]:
    """The core's `progress(step, message)` callback; it runs in the worker thread."""

    def emit(step: str, message: str) -> None:
        try:
            anyio.from_thread.run(tracker.advance, step, message)
        except Exception:  # a lost notification must never abort an install halfway
            log.debug("progress notification failed", exc_info=True)

    return emit


T = TypeVar("T")


class _Serving:
    """The calls in flight and whether the server is shutting down; used only on the event
    loop's thread (tool coroutines and the shutdown in `_serve`)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.stopping = False


SERVING = _Serving()


async def _run(ctx: Context, work: Callable[[], T], tracker: MonotonicProgress | None = None) -> T:
    """Run a blocking core call in a worker thread with a heartbeat; SetupError -> ToolError."""
    if SERVING.stopping:
        raise _refusal(
            "serve",
            "the server is shutting down: it finishes the calls already running and starts "
            "no new ones",
            "call again once the client has started the server anew",
        )
    tracker = tracker or MonotonicProgress(ctx)

    async def heartbeat() -> None:
        try:
            while True:
                await anyio.sleep(HEARTBEAT_S)
                try:
                    await tracker.heartbeat()
                except Exception:
                    log.debug("heartbeat notification failed", exc_info=True)
        finally:
            # Cancelled when the call ends or the client cancels it (the work itself is
            # shielded and runs on): either way nothing more is reported for this request.
            tracker.closed = True

    failure: Exception | None = None
    SERVING.in_flight += 1
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(heartbeat)
            try:
                # Not abandoned on cancel: an install runs to its end or its rollback, never
                # stops halfway because a client went away.
                result = await anyio.to_thread.run_sync(work)
                await tracker.finish()
            except Exception as exc:  # raised below, outside the group, so it is not wrapped
                failure = exc
            finally:
                group.cancel_scope.cancel()
    finally:
        SERVING.in_flight -= 1
    if isinstance(failure, SetupError):
        raise ToolError(failure.full_text()) from None
    if failure is not None:
        raise failure  # unexpected: the SDK logs it to stderr and tells the client nothing
    return result


def _refusal(step: str, cause: str, remedy: str) -> ToolError:
    return ToolError(InvalidInput(step, cause, remedy).full_text())


def _reap(pid: int) -> None:
    """Wait for a detached engine in the background. The server outlives the engines it starts,
    and an unreaped one would linger as a zombie that liveness checks (kill -0) count as running."""

    def wait() -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    threading.Thread(target=wait, name=f"reap-{pid}", daemon=True).start()


# The hints of the tools that only read local files and processes: safe to call any time.
LOCAL_READ = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}


def _hints(
    title: str, *, read_only: bool, destructive: bool, idempotent: bool, open_world: bool
) -> dict[str, Any]:
    annotations = ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )
    return {"title": title, "annotations": annotations}


# --------------------------------------------------------------------------------------------
# The branch question


class BranchChoice(BaseModel):
    """The form the user fills in."""

    branch: str = Field(
        min_length=1,
        max_length=MAX_BRANCH_LENGTH,
        title="Branch",
        description="'main', or the exact name of a development branch",
    )


BRANCH_QUESTION = "Install the engine from main, or from which development branch?"


def _can_ask_user(ctx: Context) -> bool:
    """The SDK's own rule: a bare `elicitation: {}` means form support; url-only does not."""
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def ask_branch(
    branch: str | None, commit: str | None, ctx: Context
) -> str | Elicit[BranchChoice] | None:
    """Resolver: the branch as given; with neither branch nor commit, ask the user. Without
    this capability check the SDK would answer with a protocol error the agent cannot act on."""
    if branch is not None or commit is not None:
        return branch
    if not _can_ask_user(ctx):
        raise _refusal(
            "choose branch",
            "no branch or commit given, and this client cannot put the question to the user",
            'ask the user "main, or which development branch?" and call install_engine again '
            "with branch=<their answer>; never choose a branch yourself",
        )
    return Elicit(BRANCH_QUESTION, BranchChoice)


def _chosen_branch(answer: ElicitationResult[BranchChoice]) -> str | None:
    if answer.action == "decline":
        raise _refusal(
            "choose branch",
            "the user declined to choose a branch; nothing was installed",
            "ask the user which branch to install (main or a development branch) and call "
            "install_engine again with branch=<name>; never choose one yourself",
        )
    if answer.action == "cancel":
        raise _refusal(
            "choose branch",
            "the user cancelled the branch question; nothing was installed",
            "do not install until the user says which branch",
        )
    # A resolver's plain return (the branch argument, or None with a commit) arrives as an
    # accepted outcome unchanged; the form's answer arrives as a BranchChoice.
    data: Any = answer.data
    return data.branch if isinstance(data, BranchChoice) else data


# --------------------------------------------------------------------------------------------
# Tools


@server.tool(
    **_hints(
        "Resolve a branch to a commit",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=True,
    )
)
async def resolve_branch(
    branch: Branch, ctx: Context, engine: EngineOption = None
) -> BranchResolution:
    """Resolve exactly refs/heads/<branch> of the engine repository to a full commit id (a tag
    or a missing branch is an error). Installs nothing; show the user the commit."""

    def work() -> BranchResolution:
        res = gitsource.resolve_branch(_profile(engine).repository, branch)
        text = messages.resolution_text(res.ref, res.commit, res.repository)
        return BranchResolution(
            repository=res.repository,
            branch=res.branch,
            ref=res.ref,
            commit=res.commit,
            message=text,
        )

    return await _run(ctx, work)


@server.tool(
    **_hints(
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
    branch: Annotated[
        Branch | None, Field(description="Branch to install; omit both this and commit to ask.")
    ] = None,
    commit: Annotated[Commit | None, Field(description="Full commit id to install.")] = None,
    create_env: Annotated[
        bool, Field(strict=True, description="Create the virtual environment if it is missing.")
    ] = False,
    extras: Annotated[tuple[Extra, ...], Field(max_length=16, description="Engine extras.")] = (),
    engine: EngineOption = None,
) -> InstallReply:
    """Install the engine from source at an exact commit into `python`: resolve, fetch, build
    a reproducible wheel, check it, install it, verify it against RECORD, and record it.
    Without branch or commit the user is asked "main, or which development branch?". On any
    failure the previous engine and its record stay exactly as they were."""
    chosen = _chosen_branch(asked)
    tracker = MonotonicProgress(ctx, STEPS)

    def work() -> InstallReply:
        request = InstallRequest(
            profile=_profile(engine),
            python=python,
            branch=chosen,
            commit=commit,
            create_env=create_env,
            extras=list(extras),
        )
        result = install.install_engine(request, _worker_progress(tracker))
        return _reply(InstallReply, result, messages.install_text(result))

    return await _run(ctx, work, tracker)


@server.tool(**_hints("Check what is installed against its record", **LOCAL_READ))
async def check_provenance(
    python: Python,
    ctx: Context,
    experiment_id: Annotated[
        ExperimentId | None,
        Field(description="Also compare the engine with this experiment's binding."),
    ] = None,
    workspace: Annotated[Workspace | None, Field(description="Workspace of experiment_id.")] = None,
    engine: EngineOption = None,
) -> ProvenanceReport:
    """Verify the engine installed in `python` against its record (direct_url.json commit,
    RECORD hashes, identity digest); with experiment_id and workspace, also compare it field by
    field with the exact build that experiment is bound to."""
    if (experiment_id is None) != (workspace is None):
        raise _refusal(
            "check provenance",
            "experiment_id and workspace go together",
            "pass both to compare with an experiment's binding, or neither",
        )

    def work() -> ProvenanceReport:
        profile = _profile(engine)
        report = install.verify(python, profile)
        lines = [messages.verify_text(report)]
        if report.exit_code == ExitCode.NOTHING_INSTALLED:
            lines += ["", messages.diagnosis_text(diagnose.diagnose(python, profile))]
        check = None
        if experiment_id is not None and workspace is not None:
            check = _binding_check(python, experiment_id, workspace)
            lines += ["", _binding_text(check, report.environment)]
        verified = report.status == "verified" and (check is None or check.matches)
        return ProvenanceReport(
            verified=verified, environment=report, experiment=check, message="\n".join(lines)
        )

    return await _run(ctx, work)


def _binding_check(python: str, experiment_id: str, workspace: str) -> BindingCheck:
    files = experiments.ExperimentFiles(
        Path(workspace).expanduser().resolve(), experiments.validate_experiment_id(experiment_id)
    )
    binding = experiments.read_binding(files)  # refuses another experiment's or an edited one
    env = locate(python)
    found = experiments.binding_differences(binding, env, RecordStore(env.state_dir).read_record())
    return BindingCheck(
        experiment_id=binding.experiment_id,
        binding_path=str(files.binding),
        bound_commit=binding.engine.source.commit,
        bound_identity_digest=binding.engine.identity_digest,
        matches=not found,
        differences=found,
        recreate_commands=experiments.recreate_commands(
            binding, Path(binding.manifest_path), files.workspace
        )
        if found
        else [],
    )


def _binding_text(check: BindingCheck, environment: str) -> str:
    if check.matches:
        return (
            f"experiment {check.experiment_id}: {environment} holds exactly the bound engine "
            f"(commit {check.bound_commit}, identity {check.bound_identity_digest})"
        )
    lines = [
        f"experiment {check.experiment_id}: the engine in {environment} is not the build it is "
        f"bound to ({len(check.differences)} fields differ; bound commit {check.bound_commit})"
    ]
    lines += [
        f"  differs: {d.field}: recorded {d.recorded}, found {d.found}" for d in check.differences
    ]
    lines.append("  recreate the bound engine in a separate environment and resume there:")
    lines += [f"    {command}" for command in check.recreate_commands]
    return "\n".join(lines)


@server.tool(**_hints("Diagnose the engine installation", **LOCAL_READ))
async def diagnose_engine(
    python: Python, ctx: Context, engine: EngineOption = None
) -> DiagnosisReply:
    """Explain what is (not) installed in `python`: the core engine, look-alike packages that do
    not provide it, the state of its record, and the commands that install it from source."""

    def work() -> DiagnosisReply:
        result = diagnose.diagnose(python, _profile(engine))
        return _reply(DiagnosisReply, result, messages.diagnosis_text(result))

    return await _run(ctx, work)


@server.tool(
    **_hints(
        "Launch an experiment",
        read_only=False,
        destructive=False,  # creates a new experiment; an existing id is refused, never replaced
        idempotent=False,  # each call starts an engine process
        open_world=False,
    )
)
async def launch_experiment(
    manifest: Manifest, workspace: Workspace, python: Python, ctx: Context
) -> StartedReply:
    """Start a new experiment bound to the verified engine in `python`, detached. Returns at
    once with the engine's pid, log path and binding path; follow it with experiment_status."""

    def work() -> StartedReply:
        started = experiments.launch_experiment(manifest, workspace, python, detach=True)
        _reap(started.pid)
        return _reply(StartedReply, started, messages.started_text(started))

    return await _run(ctx, work)


@server.tool(
    **_hints(
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
) -> StartedReply:
    """Resume the experiment with exactly this id on exactly the engine build it is bound to,
    detached. Any difference refuses with the field-level diff and the commands that recreate
    the bound engine in a separate environment; nothing is installed or upgraded."""

    def work() -> StartedReply:
        started = experiments.resume_experiment(
            experiment_id, workspace, manifest, python, detach=True
        )
        _reap(started.pid)
        return _reply(StartedReply, started, messages.started_text(started))

    return await _run(ctx, work)


@server.tool(**_hints("Experiment status", **LOCAL_READ))
async def experiment_status(
    experiment_id: ExperimentId, workspace: Workspace, ctx: Context
) -> StatusReply:
    """State, trials done, best trial and bound engine of one experiment, read from its ledger."""

    def work() -> StatusReply:
        status = experiments.experiment_status(experiment_id, workspace)
        return _reply(StatusReply, status, format_status(status))

    return await _run(ctx, work)


@server.tool(**_hints("List experiments", **LOCAL_READ))
async def list_experiments(workspace: Workspace, ctx: Context) -> ExperimentList:
    """Every experiment launched by automl-setup in the workspace, with its status."""

    def work() -> ExperimentList:
        listing = experiments.list_experiments(workspace)
        return _reply(ExperimentList, listing, messages.listing_text(listing))

    return await _run(ctx, work)


@server.tool(**_hints("Install history of an environment", **LOCAL_READ))
async def install_history(python: Python, ctx: Context) -> InstallHistory:
    """Every install into the environment and every rollback, oldest first."""

    def work() -> InstallHistory:
        entries, torn, where = install.history(python)
        return InstallHistory(
            environment=where,
            entries=entries,
            torn_line=torn,
            message=messages.history_text(entries, torn, where),
        )

    return await _run(ctx, work)


# --------------------------------------------------------------------------------------------
# Entry point


class _RedactingFormatter(logging.Formatter):
    """Tracebacks of unexpected errors can quote a URL; its credentials never reach the log."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


def _forbid_unknown_arguments() -> None:
    """Every tool refuses an argument it does not declare (a `dry_run` it has no such thing
    as, a typo `create-env`) instead of ignoring it and doing the real thing. The SDK builds
    each tool's argument model from its signature with no hook for the model's config, so the
    registered model is replaced by a subclass with extra="forbid", and the published input
    schema (now `additionalProperties: false`) regenerated from it."""
    for tool in server._tool_manager.list_tools():
        loose = tool.fn_metadata.arg_model
        strict = type(loose.__name__, (loose,), {"model_config": ConfigDict(extra="forbid")})
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)


_forbid_unknown_arguments()


REPLY_GRACE_S = 1.0


async def _stop(why: str) -> None:
    """Start no new calls; return once the running ones have finished or rolled back."""
    SERVING.stopping = True
    if SERVING.in_flight:
        log.info("%s: finishing %d running call(s) first", why, SERVING.in_flight)
    while SERVING.in_flight:
        await anyio.sleep(0.1)


async def _serve() -> None:
    """Serve until stdin closes or SIGTERM/SIGINT arrives; then start no new calls, let the
    running ones finish or roll back (each core step has its own timeout), and return."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as group:

            async def on_signal() -> None:
                async for signum in signals:
                    await _stop(signal.Signals(signum).name)
                    # The client may still hold stdin open, and the transport's blocked read
                    # of it cannot be cancelled: give the last replies a moment to be
                    # written, then leave.
                    await anyio.sleep(REPLY_GRACE_S)
                    logging.shutdown()
                    os._exit(0)

            group.start_soon(on_signal)
            await server.run_stdio_async()
            await _stop("stdin closed")
            group.cancel_scope.cancel()


def _serve_in_own_session() -> int | None:
    """MCP stdio clients stop a server by closing its stdin, then signalling its whole process
    group, SIGKILLing that group 2 s later (the SDK's policy). An install that needs longer to
    finish or roll back would die halfway and leave its environment interrupted. So the server
    runs in a child in a session of its own, which that group kill does not reach; this
    process only passes SIGTERM/SIGINT on and waits. None in the child; in this process, the
    child's exit status."""
    child = os.fork()
    if child == 0:
        os.setsid()
        return None
    # Our copies of the pipes would keep the client's ends open after the server exits.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by signal N: 128+N, as a shell says


def main() -> int:
    """Serve over stdio: `automl-setup-mcp`, or `automl-setup mcp`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # force: constructing MCPServer already configured the root logger at import time.
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    status = _serve_in_own_session()
    if status is not None:
        return status
    try:
        anyio.run(_serve)
    except KeyboardInterrupt:  # before the signal handlers are in place
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
