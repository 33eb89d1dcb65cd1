"""Starting a child, the one way: an argv list (never a shell), stdin closed unless it is given
input, its own session (no controlling terminal, so neither git nor ssh can prompt on
/dev/tty; stopping the session stops every helper it started), a time limit, and for a child
that may wait on a network the stall bound of the call (`bound.Watch`), never a global.

Waiting is woken the moment the child exits: `Popen.wait(timeout=...)` (and
`subprocess.run(timeout=...)` without pipes) polls with sleeps that grow to 50 ms, so a child
that exits is noticed up to 50 ms late, every time (an install waits for `uv build` and `uv pip
install`, a launch for the engine's `plan` and its run). A pidfd (Linux >= 5.3) is readable
once the child has exited, so poll() on it wakes at once.
"""

from __future__ import annotations

import math
import os
import select
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from mcp_server.children.bound import Watch
from mcp_server.children.watch import wait_watched

# git and ssh never ask anything: no terminal prompt, no askpass program (git's own, ssh's,
# the Git Credential Manager's). git falls back to SSH_ASKPASS only when GIT_ASKPASS is unset:
# set empty, it names no program. The user's ssh command, configuration, agent, credential
# helpers and certificate settings stay in force: no prompt by construction, not by override.
NO_PROMPT = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS_REQUIRE": "never",
    "GCM_INTERACTIVE": "never",
}
# The short helpers' bound (the target interpreter's probe, `uv venv`).
HELPER_TIMEOUT_S = 120.0
Output = int | IO[Any] | None


def start(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stdout: Output = subprocess.DEVNULL,
    stderr: Output = subprocess.DEVNULL,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """A child in a session of its own with stdin closed (a long-lived one: the engine)."""
    return subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env, cwd=cwd,
        pass_fds=pass_fds, start_new_session=True,
    )  # fmt: skip


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


def run_to(
    argv: Sequence[str],
    *,
    step: str,
    timeout: float,
    watch: Watch | None,
    stdout: Output,
    stderr: Output = subprocess.STDOUT,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Run a child to its end with its output sent where the caller says: its exit status.
    The time limit raises `subprocess.TimeoutExpired`, a stall under `watch` (None: a local
    child, no stall bound) `watch.Stalled`; either, or an interruption, stops its session."""
    with start(argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr) as proc:
        wait = lambda seconds: wait_exit(proc, seconds)  # noqa: E731
        return wait_watched(proc, timeout, step, wait, proc.wait, watch)


def run_captured(
    argv: Sequence[str],
    *,
    timeout: float,
    step: str = "",
    watch: Watch | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    input: str | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run a child to its end with its output captured as text (undecodable bytes replaced);
    `subprocess.TimeoutExpired` past `timeout`, `watch.Stalled` on a stall under `watch`, and
    with `check` `subprocess.CalledProcessError` on a non-zero exit (`process_failure`)."""
    with subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", env=env,
        cwd=cwd, start_new_session=True,
    ) as proc:  # fmt: skip
        # A communicate retried after its timeout goes on sending the same input.
        wait = lambda seconds: proc.communicate(input, timeout=seconds)  # noqa: E731
        out, err = wait_watched(proc, timeout, step, wait, proc.communicate, watch)
    done = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def run_checked(
    argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A short local helper (the target interpreter, `uv venv`): output captured, bounded in
    time; a failure raises (`process_failure` says why in one line)."""
    return run_captured(argv, timeout=HELPER_TIMEOUT_S, env=env, check=True)


def process_failure(exc: BaseException) -> str:
    """The child's own last error line; never its argv (a probe script) itself."""
    if isinstance(exc, subprocess.CalledProcessError):
        lines = (exc.stderr or "").strip().splitlines()
        return lines[-1] if lines else f"exit status {exc.returncode}"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"no answer within {exc.timeout:.0f} s"
    return str(exc)
