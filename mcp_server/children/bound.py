"""The stall bound of a call: how long a child that may wait on a network goes without progress
before it is given up on, and where it says what it waits on. An operation makes one from its
request (`Watch.of(request.stall_timeout, progress)`) and passes it to every child it starts;
no global carries it. The limits are the request models' too (requests.py imports them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_STALL_S = 30.0
MIN_STALL_S = 1.0
MAX_STALL_S = 3600.0


@dataclass(frozen=True)
class Watch:
    """How long a network child may go without progress, and where to say what it waits on
    (`progress(step, message)`, the operation's own progress sink)."""

    stall_s: float = DEFAULT_STALL_S
    progress: Callable[[str, str], None] | None = None

    @classmethod
    def of(
        cls, stall_timeout: float | None, progress: Callable[[str, str], None] | None = None
    ) -> Watch:
        """A request's bound (`None`: the default)."""
        return cls(DEFAULT_STALL_S if stall_timeout is None else stall_timeout, progress)
