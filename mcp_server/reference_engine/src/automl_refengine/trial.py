"""One trial: an argv subprocess in its own process group, supervised until it ends.

A trial is its process group. Whatever ends it (normal exit, trial timeout, the
experiment's total timeout, a signal to the controller, a cancel), the group is
killed before the leader is reaped, so no stray child outlives its trial and the
group id cannot have been reused when it is signalled.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

# The minimal environment every trial gets; anything else must be named in the manifest.
# PYTHONDONTWRITEBYTECODE: a controller told not to write bytecode into its environment (as
# automl-setup starts it) keeps its trials, which run that environment's Python, from it too.
BASE_ENV = ("PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE")
KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL to the trial's group
POLL_S = 0.02
MAX_METRICS_BYTES = 1_000_000
STDOUT_LOG, STDERR_LOG = "stdout.log", "stderr.log"

StopRequest = Literal["signal", "cancel"]
Reason = Literal[
    "ok",
    "exit_code",
    "bad_metrics",
    "trial_timeout",
    "total_timeout",
    "launch_error",
    "signal",
    "cancel",
]


@dataclass(frozen=True)
class TrialOutcome:
    status: Literal["succeeded", "failed", "interrupted"]
    reason: Reason
    duration_s: float
    returncode: int | None = None
    value: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    detail: str = ""


def trial_env(pass_env: list[str]) -> dict[str, str]:
    """PATH, HOME, LANG and the manifest's names, taken from the controller's environment."""
    return {name: os.environ[name] for name in (*BASE_ENV, *pass_env) if name in os.environ}


def launch(argv: list[str], trial_dir: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start the trial; raises OSError when argv[0] cannot be executed."""
    with (trial_dir / STDOUT_LOG).open("wb") as out, (trial_dir / STDERR_LOG).open("wb") as err:
        return subprocess.Popen(
            argv,
            cwd=trial_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # own process group, and no terminal signals
        )


def _leader_exited(pid: int) -> bool:
    """True once the leader is a zombie; WNOWAIT leaves it unreaped, pinning the group id."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # every member already gone
        os.killpg(pgid, sig)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group, give it a grace period, then SIGKILL whatever is left."""
    _kill_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while not _leader_exited(proc.pid) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


def read_metrics(path: Path, metric: str) -> tuple[float, dict[str, float]]:
    """The objective value and every finite numeric metric; ValueError explains a bad file."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_METRICS_BYTES + 1)
    except FileNotFoundError:
        raise ValueError(f"metrics file {path.name} was not written") from None
    if len(raw) > MAX_METRICS_BYTES:
        raise ValueError(f"metrics file {path.name} is larger than {MAX_METRICS_BYTES} bytes")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"metrics file {path.name} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"metrics file {path.name} does not hold a JSON object")
    metrics = {
        str(key): float(value)
        for key, value in data.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }
    if metric not in metrics:
        raise ValueError(f"metrics file {path.name} has no finite number {metric!r}")
    return metrics[metric], metrics


def supervise(
    proc: subprocess.Popen[bytes],
    *,
    trial_deadline: float,
    total_deadline: float,
    stop_requested: Callable[[], StopRequest | None],
    metrics_path: Path,
    metric: str,
) -> TrialOutcome:
    """Wait for the trial, enforcing both deadlines (monotonic clock) and stop requests."""
    started = time.monotonic()
    reason: Reason | None = None
    while not _leader_exited(proc.pid):
        now = time.monotonic()
        stop = stop_requested()
        if stop is not None:
            reason = stop
        elif now >= total_deadline:
            reason = "total_timeout"
        elif now >= trial_deadline:
            reason = "trial_timeout"
        if reason is not None:
            _stop_group(proc)
            break
        time.sleep(POLL_S)
    _kill_group(proc.pid, signal.SIGKILL)
    returncode = proc.wait()
    duration = round(time.monotonic() - started, 6)
    if reason is None and returncode < 0:
        # The controller's stop signal may reach the trial itself too (SLURM signals every
        # process of a job on preemption): a trial killed so was interrupted, not failed.
        reason = stop_requested()
    if reason in ("signal", "cancel"):
        return TrialOutcome(
            "interrupted", reason, duration, returncode, detail=f"stopped by {reason}"
        )
    if reason is not None:
        return TrialOutcome("failed", reason, duration, returncode, detail=f"killed: {reason}")
    if returncode != 0:
        return TrialOutcome(
            "failed", "exit_code", duration, returncode, detail=_describe_exit(returncode)
        )
    try:
        value, metrics = read_metrics(metrics_path, metric)
    except ValueError as exc:
        return TrialOutcome("failed", "bad_metrics", duration, returncode, detail=str(exc))
    return TrialOutcome("succeeded", "ok", duration, returncode, value, metrics)
