"""The watchdog over a child that may wait on a network (git, the ssh and https helpers git
starts, uv and the git uv starts): given up on after its call's stall bound without progress,
naming what it waited on.

Progress is what the child's process tree reads and writes (a socket read counts, a compiler's
output too) or a child starting or ending; a process working its CPU hard (a build) counts as
well. An idle poll loop does not: curl wakes up a few times a second while a server sends
nothing, which is far below the CPU share that counts. Where a process's I/O counters cannot be
read (tree.readable: not Linux) only each step's overall time limit applies.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_server.children.bound import Watch
from mcp_server.children.tree import Connection, ProcessSample, connections, readable, sample_tree

SAMPLE_S = 0.5
# A process that used at least this share of a core since the last sample is working.
BUSY_SHARE = 0.2
T = TypeVar("T")
# Tell the user what is awaited after this long without progress, then this often.
FIRST_WORD_S = 5.0


@dataclass
class Stall:
    """What a child that stopped making progress was waiting on."""

    idle_s: float
    bound_s: float
    connections: list[Connection]

    def describe(self) -> str:
        if self.connections:
            peers = "; ".join(f"{c.peer} ({c.state}, {c.process})" for c in self.connections)
            waited = f"waiting on {peers}"
        else:
            waited = "with no connection open (waiting on a name lookup or a local process)"
        counts = [c.received for c in self.connections]
        if not counts or None in counts:  # the kernel did not say: nothing claimed
            return f"no progress for {self.idle_s:.0f} s, {waited}"
        total = sum(c for c in counts if c is not None)
        received = (
            f"{_size(total)} had arrived on it before it went quiet"
            if total
            else "nothing had arrived on it"
        )
        return f"no progress for {self.idle_s:.0f} s, {waited}; {received}"


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1 << 20:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1 << 20):.1f} MiB"


class Stalled(Exception):
    def __init__(self, stall: Stall) -> None:
        super().__init__(stall.describe())
        self.stall = stall


@dataclass
class Watchdog:
    """Samples a child's process tree; `check()` raises `Stalled` once nothing moved for
    `stall_s`, and tells `say` what it waits on while it waits."""

    pid: int
    stall_s: float
    say: Callable[[str], None] | None = None
    last: dict[int, ProcessSample] = field(default_factory=dict)
    quiet_since: float = field(default_factory=time.monotonic)
    sampled_at: float = field(default_factory=time.monotonic)
    next_word: float = FIRST_WORD_S
    enabled: bool = field(default_factory=readable)

    def check(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        samples = sample_tree(self.pid)
        if self._progressed(samples, now - self.sampled_at):
            self.quiet_since, self.next_word = now, FIRST_WORD_S
        self.last, self.sampled_at = samples, now
        idle = now - self.quiet_since
        if idle >= self.stall_s:
            raise Stalled(self._stall(idle))
        if idle >= self.next_word and self.say is not None:
            self.next_word = idle + FIRST_WORD_S
            self.say(f"{self._stall(idle).describe()}; giving up at {self.stall_s:.0f} s")

    def _stall(self, idle: float) -> Stall:
        return Stall(idle, self.stall_s, connections(self.pid))

    def _progressed(self, samples: dict[int, ProcessSample], elapsed: float) -> bool:
        if samples.keys() != self.last.keys():
            return True  # a process started or ended
        busy = BUSY_SHARE * max(elapsed, SAMPLE_S)
        return any(
            (s.read, s.written) != (self.last[pid].read, self.last[pid].written)
            or s.cpu - self.last[pid].cpu >= busy
            for pid, s in samples.items()
        )


def wait_watched(
    proc: subprocess.Popen[Any],
    timeout: float,
    step: str,
    wait: Callable[[float], T],
    reap: Callable[[], object],
    watch: Watch | None,
) -> T:
    """`wait(seconds)` for the child `proc` (started in a session of its own) until it returns,
    watched under the call's stall bound `watch` (None: a local child, the time limit alone),
    its progress sink told what it waits on as `step`. A stall (`Stalled`), the time limit
    (`subprocess.TimeoutExpired`) or an interruption kills the child's whole session and
    `reap`s it before the exception goes on."""
    watchdog = None
    if watch is not None:
        say = None if watch.progress is None else functools.partial(watch.progress, step)
        watchdog = Watchdog(proc.pid, watch.stall_s, say)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = max(0.0, deadline - time.monotonic())
            try:
                return wait(left if watchdog is None else min(SAMPLE_S, left))
            except subprocess.TimeoutExpired:
                if watchdog is None or time.monotonic() >= deadline:
                    raise
                watchdog.check()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        reap()
        raise
