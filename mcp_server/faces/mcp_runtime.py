"""The MCP face's runtime: progress and heartbeats for a blocking core call run in a worker
thread, refusals as tool errors, strict tool arguments, and a shutdown that lets running calls
finish or roll back. No tool lives here (see server.py)."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ConfigDict

from mcp_server.errors import InvalidInput, SetupError
from mcp_server.redact import redact_text

log = logging.getLogger("automl_setup.mcp")

# A heartbeat at least this often during any blocking call (the issue asks for <= 10 s).
HEARTBEAT_S = 5.0
REPLY_GRACE_S = 1.0

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


def worker_progress(tracker: MonotonicProgress) -> Callable[[str, str], None]:
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


async def run(ctx: Context, work: Callable[[], T], tracker: MonotonicProgress | None = None) -> T:
    """Run a blocking core call in a worker thread with a heartbeat; SetupError -> ToolError."""
    if SERVING.stopping:
        raise refusal(
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
        from mcp_server.faces.remedies import tool_error_text  # imports every operation

        raise ToolError(tool_error_text(failure)) from None
    if failure is not None:
        raise failure  # unexpected: the SDK logs it to stderr and tells the client nothing
    return result


def refusal(step: str, cause: str, remedy: str) -> ToolError:
    return ToolError(InvalidInput(step, cause, remedy).full_text())


def reap(pid: int) -> None:
    """Wait for a detached engine in the background. The server outlives the engines it starts,
    and an unreaped one would linger as a zombie that liveness checks (kill -0) count as running."""

    def wait() -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    threading.Thread(target=wait, name=f"reap-{pid}", daemon=True).start()


# --------------------------------------------------------------------------------------------
# Arguments, logging and the lifecycle of the server


class RedactingFormatter(logging.Formatter):
    """Tracebacks of unexpected errors can quote a URL; its credentials never reach the log."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


def forbid_unknown_arguments(server: MCPServer) -> None:
    """Every tool refuses an argument it does not declare (a `dry_run` it has no such thing
    as, a typo `create-env`) instead of ignoring it and doing the real thing. The SDK builds
    each tool's argument model from its signature with no hook for the model's config, so the
    registered model is replaced by a subclass with extra="forbid", and the published input
    schema closed the same way (`additionalProperties: false`, all that extra="forbid" changes
    in it). Start-up time: the subclass's validator is built on its first call, and the schema
    is not regenerated (tests/test_startup.py checks it equals the regenerated one)."""
    for tool in server._tool_manager.list_tools():
        loose = tool.fn_metadata.arg_model
        config = ConfigDict(extra="forbid", defer_build=True)
        strict = type(loose.__name__, (loose,), {"model_config": config})
        tool.fn_metadata.arg_model = strict
        tool.parameters = {**tool.parameters, "additionalProperties": False}


def plain_description(docstring: str | None) -> str:
    """A docstring as a tool's description: no indentation, each paragraph one line."""
    paragraphs = inspect.cleandoc(docstring or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def tidy_descriptions(server: MCPServer) -> None:
    """The SDK publishes a tool's docstring as written, indentation and line breaks of the
    source included; clients show it to people and models as it comes."""
    for tool in server._tool_manager.list_tools():
        tool.description = plain_description(tool.description)
    for template in server._resource_manager.list_templates():
        template.description = plain_description(template.description)


async def _stop(why: str) -> None:
    """Start no new calls; return once the running ones have finished or rolled back."""
    SERVING.stopping = True
    if SERVING.in_flight:
        log.info("%s: finishing %d running call(s) first", why, SERVING.in_flight)
    while SERVING.in_flight:
        await anyio.sleep(0.1)


async def serve(server: MCPServer) -> None:
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


def serve_in_own_session() -> int | None:
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
