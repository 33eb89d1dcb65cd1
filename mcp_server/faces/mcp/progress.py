"""Progress notifications of a tool call: steps and heartbeats for a blocking core call run in
a worker thread, strictly increasing as the specification wants."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio.from_thread
from mcp.server.mcpserver import Context

log = logging.getLogger("automl_setup.mcp")

# A heartbeat at least this often during any blocking call (the issue asks for <= 10 s).
HEARTBEAT_S = 5.0


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
