"""The server's lifecycle: the calls in flight, a shutdown that lets running calls finish or roll
back, the session of its own that a client's group kill does not reach, and a log that never
quotes a credential."""

from __future__ import annotations

import contextlib
import logging
import os
import signal

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_server.redact import redact_text

log = logging.getLogger("automl_setup.mcp")
REPLY_GRACE_S = 1.0


class _Serving:
    """The calls in flight and whether the server is shutting down; used only on the event
    loop's thread (tool coroutines and the shutdown in `_serve`)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.stopping = False


SERVING = _Serving()


class RedactingFormatter(logging.Formatter):
    """Tracebacks of unexpected errors can quote a URL; its credentials never reach the log."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


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
