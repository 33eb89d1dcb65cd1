"""Waiting for a child process with a time limit, woken the moment it exits.

`Popen.wait(timeout=...)` (and `subprocess.run(timeout=...)` without pipes) polls with sleeps
that grow to 50 ms, so a child that exits is noticed up to 50 ms late, every time: an install
waits for `uv build` and `uv pip install`, a launch for the engine's `plan` and its run. A
pidfd (Linux >= 5.3) is readable once the child has exited, so poll() on it wakes at once.
"""

from __future__ import annotations

import math
import os
import select
import subprocess
from typing import Any


def wait_exit(proc: subprocess.Popen[Any], timeout: float | None) -> int:
    """`proc`'s exit status, waiting at most `timeout` seconds (None: for as long as it runs);
    `subprocess.TimeoutExpired` when it is still running then, as `Popen.wait` raises."""
    if timeout is None or proc.returncode is not None:
        # A blocking waitpid is woken at the exit already; a reaped child's pid may name
        # another process by now, so no pidfd is opened for it.
        return proc.wait()
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here, or the child was reaped already
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(math.ceil(timeout * 1000)):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(pidfd)
    return proc.wait()
