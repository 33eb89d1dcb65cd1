"""The MCP resources: what an agent reads (an environment's install record and history, an
experiment's binding, attempts ledger, status and the tail of an attempt's log), each behind a
URI template, read through the same core as the tools and checked by the same value types.

A path travels as one URI segment, percent-encoded whole (RFC 6570 simple expansion: '/'
becomes %2F), so any absolute path round-trips and a template can never match across it:

    automl-setup://environment/%2Fsrv%2Fvenv/record
    automl-setup://experiment/%2Fsrv%2Fws/exp-1/log/2

Every refusal is the core's own text (cause and remedy), sent as an invalid-params error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp.shared.uri_template import UriTemplate
from mcp.types import InputRequiredResult
from pydantic import BaseModel, ConfigDict, Field

from mcp_server import operations
from mcp_server.environment.records import RecordStore
from mcp_server.environment.target import locate
from mcp_server.errors import Fix, InvalidInput, SetupError, shown
from mcp_server.experiments.attempts import AttemptEntry, read_attempts
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.files import ExperimentFiles, require_experiment
from mcp_server.experiments.logs import attempt_log
from mcp_server.experiments.started import StartedEngine
from mcp_server.faces.mcp.remedies import tool_error_text
from mcp_server.faces.mcp.roots import check_roots, resource_roots
from mcp_server.requests import HistoryQuery, StatusQuery
from mcp_server.values import ExperimentId, TargetPath, WorkspacePath

ENVIRONMENT = "automl-setup://environment/{python}"
EXPERIMENT = "automl-setup://experiment/{workspace}/{experiment_id}"
JSON = "application/json"

# The SDK's default policy refuses absolute paths, which every path here is; the value types
# below hold every rule for these strings (the tools' rules), with a message that says why.
OWN_CHECKS = ResourceSecurity(exempt_params={"python", "workspace", "experiment_id", "attempt"})


def environment_uri(python: str, leaf: str) -> str:
    return UriTemplate.parse(f"{ENVIRONMENT}/{leaf}").expand({"python": python})


def experiment_uri(workspace: str, experiment_id: str, leaf: str) -> str:
    template = UriTemplate.parse(f"{EXPERIMENT}/{leaf}")
    return template.expand({"workspace": workspace, "experiment_id": experiment_id})


class StartedResources(BaseModel):
    """The resource URIs of a started attempt, beside the paths the reply already carries."""

    binding_resource: str = Field(description="URI of the experiment's binding.")
    attempts_resource: str = Field(description="URI of the experiment's attempts ledger.")
    status_resource: str = Field(description="URI of the experiment's status.")
    log_resource: str | None = Field(description="URI of the tail of this attempt's log.")


def started_resources(started: StartedEngine, workspace: WorkspacePath) -> dict[str, Any]:
    files = ExperimentFiles(workspace.path, ExperimentId(started.experiment_id))
    entries, _torn = read_attempts(files)
    # The ledger, not the log's file name, says which attempt wrote this log.
    number = next((e.attempt for e in reversed(entries) if e.log == started.log_path), None)

    def uri(leaf: str) -> str:
        return experiment_uri(str(workspace), started.experiment_id, leaf)

    log = uri(f"log/{number}") if number is not None else None
    return StartedResources(
        binding_resource=uri("binding"),
        attempts_resource=uri("attempts"),
        status_resource=uri("status"),
        log_resource=log,
    ).model_dump()


def started_reply(request: Any, started: StartedEngine) -> dict[str, Any]:
    """What a launch's or resume's reply adds: the server reaps the detached engine (it
    outlives the engines it starts), and the reply names the started attempt's resources."""
    from mcp_server.faces.mcp.calls import reap

    reap(started.pid)
    return started_resources(started, request.workspace)


class AttemptsLedger(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str
    attempts_path: str
    entries: list[AttemptEntry]
    torn_line: int | None = Field(description="Line number of a torn (interrupted) write.")


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A core refusal reaches the client as its full text (the SDK would otherwise hide any
    other exception behind "Error creating resource")."""
    try:
        yield
    except SetupError as exc:
        raise ResourceNotFoundError(tool_error_text(exc)) from None


def _experiment(workspace: str, experiment_id: str) -> ExperimentFiles:
    files = ExperimentFiles(WorkspacePath(workspace).path, ExperimentId(experiment_id))
    require_experiment(files, "read resource", remedy="see the experiments of the workspace with")
    return files


def _attempt_number(attempt: str) -> int:
    if not (attempt.isascii() and attempt.isdigit() and 0 < len(attempt) <= 9 and int(attempt)):
        raise InvalidInput(
            "read log",
            f"{shown(attempt, 20)} is not an attempt number",
            "use the attempt number of the attempts ledger (1, 2, ...)",
        )
    return int(attempt)


async def _confined(
    ctx: Context, work: Callable[[], str], **paths: str
) -> str | InputRequiredResult:
    """`work()` in a worker thread once every path parameter lies inside the client's roots
    (the tools' rule, `mcp_roots.check_roots`); a refusal is the core's text."""
    roots = await resource_roots(ctx)
    if isinstance(roots, InputRequiredResult):  # asked of the client; it retries the read
        return roots

    def checked() -> str:
        with _refusals():
            check_roots(roots, **paths)
            return work()

    return await anyio.to_thread.run_sync(checked)


def _record(python: str) -> str:
    env = locate(TargetPath(python))
    record = RecordStore(env.state_dir).read_record()
    if record is None:
        raise SetupError(
            "read record",
            f"no install record in {env.prefix}",
            [
                "install the engine first: ",
                Fix("install", (("branch", "BRANCH"), ("python", str(env.prefix)))),
            ],
        )
    return record.model_dump_json(indent=2)


def _history(python: str) -> str:
    return operations.history(HistoryQuery(python=TargetPath(python))).model_dump_json(indent=2)


def _attempts(workspace: str, experiment_id: str) -> str:
    files = _experiment(workspace, experiment_id)
    entries, torn = read_attempts(files)
    ledger = AttemptsLedger(
        experiment_id=files.experiment_id,
        attempts_path=str(files.attempts),
        entries=entries,
        torn_line=torn,
    )
    return ledger.model_dump_json(indent=2)


def _status(workspace: str, experiment_id: str) -> str:
    query = StatusQuery(
        experiment_id=ExperimentId(experiment_id), workspace=WorkspacePath(workspace)
    )
    return operations.status(query).model_dump_json(indent=2)


def _log(workspace: str, experiment_id: str, attempt: str) -> str:
    return attempt_log(_experiment(workspace, experiment_id), _attempt_number(attempt))[2]


ReadFn = TypeVar("ReadFn", bound=Callable[..., Any])


def register(server: MCPServer) -> None:
    """Declare the resource templates on `server` (the MCPServer of faces/server.py)."""

    def resource(template: str, mime_type: str = JSON) -> Callable[[ReadFn], ReadFn]:
        return server.resource(template, mime_type=mime_type, security=OWN_CHECKS)

    @resource(f"{ENVIRONMENT}/record")
    async def environment_record(python: str, ctx: Context) -> str | InputRequiredResult:
        """The install record of the engine in the environment (interpreter or venv
        directory), exactly the JSON of its engine-record.json."""
        return await _confined(ctx, lambda: _record(python), python=python)

    @resource(f"{ENVIRONMENT}/history")
    async def environment_history(python: str, ctx: Context) -> str | InputRequiredResult:
        """Every install and rollback in the environment: `automl-setup history --json`."""
        return await _confined(ctx, lambda: _history(python), python=python)

    @resource(f"{EXPERIMENT}/binding")
    async def experiment_binding(
        workspace: str, experiment_id: str, ctx: Context
    ) -> str | InputRequiredResult:
        """The experiment's binding to its exact engine build, read strictly."""

        def work() -> str:
            return read_binding(_experiment(workspace, experiment_id)).model_dump_json(indent=2)

        return await _confined(ctx, work, workspace=workspace)

    @resource(f"{EXPERIMENT}/attempts")
    async def experiment_attempts(
        workspace: str, experiment_id: str, ctx: Context
    ) -> str | InputRequiredResult:
        """Every launch, resume, stop, refusal and exit of the experiment, oldest first."""
        return await _confined(
            ctx, lambda: _attempts(workspace, experiment_id), workspace=workspace
        )

    @resource(f"{EXPERIMENT}/status")
    async def experiment_status(
        workspace: str, experiment_id: str, ctx: Context
    ) -> str | InputRequiredResult:
        """The experiment's status: `automl-setup status --json`."""
        return await _confined(ctx, lambda: _status(workspace, experiment_id), workspace=workspace)

    @resource(f"{EXPERIMENT}/log/{{attempt}}", mime_type="text/plain")
    async def experiment_log(
        workspace: str, experiment_id: str, attempt: str, ctx: Context
    ) -> str | InputRequiredResult:
        """The last 64 KiB of the engine output of one attempt (from its first whole line),
        credentials masked: what `automl-setup logs --attempt N` shows."""
        return await _confined(
            ctx, lambda: _log(workspace, experiment_id, attempt), workspace=workspace
        )
