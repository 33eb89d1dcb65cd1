"""A call's cooperative stop. The MCP face runs an operation in a worker thread, which nothing
can interrupt from outside; when the client cancels the call (`notifications/cancelled`, or it
gave up waiting), the face sets the call's stop flag, and an operation that loops over many
steps (a sync's runs) checks it between two of them (`stop_point`) and ends there, as a sync
cut off halfway would. An operation that must not stop halfway (an install) never checks it.
On the command line there is no flag: Ctrl-C interrupts the process itself."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

from mcp_server.errors import SetupError

T = TypeVar("T")

_STOP: ContextVar[threading.Event | None] = ContextVar("automl_setup_stop", default=None)


def run_stoppable(stop: threading.Event, work: Callable[[], T]) -> T:
    """Run `work` (in the calling thread) with `stop` as its stop flag."""
    token = _STOP.set(stop)
    try:
        return work()
    finally:
        _STOP.reset(token)


def stop_point(step: str, remedy: str) -> None:
    """End the running operation here if its call was cancelled; `remedy` says how what was
    done so far is completed."""
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise SetupError(step, "the client cancelled this call: stopped between two steps", remedy)
