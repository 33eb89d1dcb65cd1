"""A tool call: `tool` registers a tool under its row's name, title and annotations
(`faces/registry/`), `call` anchors and checks its path arguments, builds the request, runs the
operation in a worker thread with a heartbeat (`run`: a refusal becomes a tool error; a cancelled
call sets the work's stop flag, cancellation.py) and makes the reply, the operation's result
plus the text the command line prints for it."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ListRootsResult, ToolAnnotations
from pydantic import BaseModel, Field, create_model

from mcp_server.cancellation import run_stoppable
from mcp_server.errors import InvalidInput, SetupError, shown
from mcp_server.faces.mcp.app import server
from mcp_server.faces.mcp.lifecycle import SERVING
from mcp_server.faces.mcp.progress import HEARTBEAT_S, MonotonicProgress, log, worker_progress
from mcp_server.faces.mcp.remedies import refusal
from mcp_server.faces.mcp.roots import STEP, check_roots, first_root
from mcp_server.fsutil import storage_refusals
from mcp_server.values import has_control

T = TypeVar("T")


async def run(ctx: Context, work: Callable[[], T], tracker: MonotonicProgress | None = None) -> T:
    """Run a blocking core call in a worker thread with a heartbeat; SetupError -> ToolError.
    Cancelled (by the client, or its going away), the call sets the work's stop flag."""
    if SERVING.stopping:
        raise refusal(
            "serve",
            "the server is shutting down: it finishes the calls already running and starts "
            "no new ones",
            "call again once the client has started the server anew",
        )
    tracker = tracker or MonotonicProgress(ctx)
    stop = threading.Event()

    async def heartbeat() -> None:
        try:
            while True:
                await anyio.sleep(HEARTBEAT_S)
                try:
                    await tracker.heartbeat()
                except Exception:
                    log.debug("heartbeat notification failed", exc_info=True)
        finally:
            # Cancelled when the call ends or the client cancels it: either way nothing more
            # is reported for this request, and a work that checks its stop flag (a sync)
            # ends at its next stop point.
            tracker.closed = True
            stop.set()

    failure: Exception | None = None
    SERVING.in_flight += 1
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(heartbeat)
            try:
                # Not abandoned on cancel: the call ends when its thread does. An install
                # never checks the stop flag: it runs to its end or its rollback, never
                # stopping halfway because a client went away.
                result = await anyio.to_thread.run_sync(run_stoppable, stop, work)
                await tracker.finish()
            except Exception as exc:  # raised below, outside the group, so it is not wrapped
                failure = exc
            finally:
                group.cancel_scope.cancel()
    finally:
        SERVING.in_flight -= 1
    if isinstance(failure, SetupError):
        from mcp_server.faces.mcp.remedies import tool_error_text  # imports every operation

        raise ToolError(tool_error_text(failure)) from None
    if failure is not None:
        raise failure  # unexpected: the SDK logs it to stderr and tells the client nothing
    return result


def reap(pid: int) -> None:
    """Wait for a detached engine in the background. The server outlives the engines it starts,
    and an unreaped one would linger as a zombie that liveness checks (kill -0) count as running."""

    def wait() -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    threading.Thread(target=wait, name=f"reap-{pid}", daemon=True).start()


Message = Annotated[str, Field(description="The text `automl-setup` prints for the same call.")]


@functools.cache
def reply_model(*bases: type[BaseModel]) -> type[BaseModel]:
    """A tool's structured result: the operation's result model (and the fields of an extra
    model) with `message`, the text the command line prints for it; made once per result type,
    the SDK publishes it as the output schema."""
    fields: Any = {"message": (Message, ...)}
    return create_model(f"{bases[0].__name__}Reply", __base__=bases, **fields)


ToolT = TypeVar("ToolT", bound=Callable[..., Any])


def tool(command: str) -> Callable[[ToolT], ToolT]:
    """Register the decorated function as the MCP tool of operation `command`: the tool's
    name, title and annotations are its row's."""
    from mcp_server.faces.registry import row

    op = row(command)
    annotations = ToolAnnotations(
        title=op.title,
        read_only_hint=op.hints.read_only,
        destructive_hint=op.hints.destructive,
        idempotent_hint=op.hints.idempotent,
        open_world_hint=op.hints.open_world,
    )
    register: Callable[[ToolT], ToolT] = server.tool(
        name=op.tool, title=op.title, annotations=annotations
    )
    return register


async def call(
    ctx: Context,
    roots: ListRootsResult | None,
    command: str,
    *,
    tracker: MonotonicProgress | None = None,
    after: Callable[[Any, Any], dict[str, Any]] | None = None,
    extra: type[BaseModel] | None = None,
    **arguments: Any,
) -> Any:
    """Run operation `command` for a tool: its path arguments anchored and checked against the
    client's roots, `profile` resolved (over the project file found from the first root), the
    request built and the operation run in a worker thread (progress through `tracker`), its
    reply made from the result, `after(request, result)`'s fields (of model `extra`) and the
    rendered message."""
    from mcp_server.faces.mcp.inputs import engine_profile, project_start
    from mcp_server.faces.registry import row
    from mcp_server.faces.registry.fields import build_request, shapes
    from mcp_server.source.config import project_stall_timeout

    op = row(command)

    def work() -> BaseModel:
        judged: dict[str, str] = {}  # every path argument, as check_roots names it
        for shape in shapes(op.request):
            value = arguments.get(shape.name)
            if shape.kind is not None and shape.kind.path and value:
                values = tuple(anchored(roots, shape.name, v) for v in _many(value))
                arguments[shape.name] = values if shape.repeated else values[0]
                if shape.repeated:  # `keep_bound`: each a workspace
                    for one in values:
                        check_roots(roots, **{ROOTS_ARGUMENT[shape.name]: one})
                else:
                    judged[shape.name] = values[0]
        profile = arguments.get("profile")
        if profile is not None and profile.file:
            profile = profile.model_copy(
                update={"file": anchored(roots, "profile.file", profile.file)}
            )
            judged["profile_file"] = profile.file
        check_roots(roots, **judged)  # one refusal naming every path outside the roots
        if "profile" in arguments:
            arguments["profile"] = engine_profile(profile, roots)
        if "stall_timeout" in arguments:  # as the command line: the project file's bound
            arguments["stall_timeout"] = project_stall_timeout(
                project_start(roots), arguments["stall_timeout"]
            )
        request = build_request(op.request, arguments)
        progress = None if tracker is None else worker_progress(tracker)
        with storage_refusals(op.command):  # full or read-only where no state access caught it
            result = op.run(request, progress)
        added = after(request, result) if after else {}
        fields = {**result.model_dump(), **added, "message": op.render(result)}
        model: type[BaseModel] = op.result
        return reply_model(model, *((extra,) if extra else ())).model_validate(fields)

    return await run(ctx, work, tracker)


# The argument of check_roots a path field is judged as (a workspace of `keep_bound`).
ROOTS_ARGUMENT = {"keep_bound": "workspace"}


def _many(value: Any) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def anchored(roots: ListRootsResult | None, name: str, value: str) -> str:
    """A path argument made absolute: as given when it is, else below the client's first local
    root (the user's project); never the server's working directory, which is nobody's
    choice. Refused when it is relative and the client declared no root."""
    path = Path(value).expanduser()
    if path.is_absolute() or has_control(value):  # the value type refuses the latter itself
        return value
    base = first_root(roots)
    if base is None:
        raise InvalidInput(
            STEP,
            f"{name} {shown(value, 100)} is a relative path, and the client declared no root it "
            "could be relative to; nothing was touched",
            "pass an absolute path",
        )
    return str(base / path)
