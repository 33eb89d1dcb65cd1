"""Stopping an experiment's engine: SIGTERM to exactly the process automl-setup started (its pid
and its start time, as the attempts ledger recorded them: a pid the kernel has given to another
process is never signalled), a wait for it to save and exit, SIGKILL of its process group after
the grace period when asked, and what the engine's ledger says afterwards. Every stop, refused
or done, is a line of the attempts ledger."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.errors import SetupError
from mcp_server.experiments.attempts import AttemptEntry, log_attempt, read_attempts, record_refusal
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.engine import engine_status
from mcp_server.experiments.files import (
    ExperimentFiles,
    lock_is_held,
    require_experiment,
    status_fix,
)
from mcp_server.experiments.process import process_start
from mcp_server.requests import StopRequest

STEP = "stop"
KILL_WAIT_S = 10.0  # after SIGKILL the kernel needs only to reap it
POLL_S = 0.05


class StopResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment whose engine was signalled.")
    pid: int = Field(description="The engine process automl-setup started.")
    signals: list[str] = Field(description="The signals sent, in order (SIGTERM, SIGKILL).")
    stopped: bool = Field(description="True when the engine has exited.")
    waited_s: float = Field(description="Seconds spent waiting for it to exit.")
    state: str | None = Field(description="The experiment's state, as the engine reports it.")
    trials_done: int | None = Field(description="Finished trials, as the engine reports them.")
    attempt: int = Field(description="Number of the stop's line in the attempts ledger.")
    notes: list[str] = Field(description="What the engine's status could not say, and why.")


def running_engine(files: ExperimentFiles) -> AttemptEntry:
    """The ledger's entry of the engine running now, proven to be that very process."""
    entries, _torn = read_attempts(files)
    started = [e for e in entries if e.outcome == "accepted" and e.pid is not None]
    if not lock_is_held(files) or not started:
        raise SetupError(
            STEP,
            f"experiment {files.experiment_id} is not running (no engine holds its controller "
            "lock); nothing was signalled",
            ["see its state with ", status_fix(files)],
        )
    entry = started[-1]
    assert entry.pid is not None
    if entry.host != socket.gethostname():
        raise SetupError(
            STEP,
            f"the engine of {files.experiment_id} was started on {entry.host}, not here; "
            "nothing was signalled",
            f"stop it on {entry.host}",
        )
    now = process_start(entry.pid)
    if entry.process_start is None or now != entry.process_start:
        gone = "no longer exists" if now is None else "is now another process"
        raise SetupError(
            STEP,
            f"pid {entry.pid} of attempt {entry.attempt} {gone} (its start time is not the "
            "one the ledger recorded), so it is not the engine automl-setup started; nothing "
            "was signalled",
            ["see who holds the experiment with ", status_fix(files)],
        )
    return entry


def _wait_exit(files: ExperimentFiles, seconds: float) -> bool:
    """True once no process holds the controller lock (the engine holds it while it lives)."""
    deadline = time.monotonic() + seconds
    while lock_is_held(files):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def stop_experiment(request: StopRequest) -> StopResult:
    files = ExperimentFiles(request.workspace.path, request.experiment_id)
    require_experiment(files, STEP, remedy="stop takes an exact id; list them with")
    try:
        entry = running_engine(files)
    except SetupError as exc:
        record_refusal(files, exc, action="stop")
        raise
    assert entry.pid is not None
    began = time.monotonic()
    signals = ["SIGTERM"]
    with contextlib.suppress(ProcessLookupError):  # it may have exited a moment ago
        os.kill(entry.pid, signal.SIGTERM)
    stopped = _wait_exit(files, request.grace)
    if not stopped and request.kill and process_start(entry.pid) == entry.process_start:
        # Its own session (started so): the engine and every trial it runs go together.
        signals.append("SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(entry.pid, signal.SIGKILL)
        stopped = _wait_exit(files, KILL_WAIT_S)
    waited = round(time.monotonic() - began, 3)
    data, problem = engine_status(read_binding(files), files.workspace, entry.environment)
    state = str(data["state"]) if data else None
    done = "exited" if stopped else "is still running"
    logged = log_attempt(
        files,
        action="stop",
        outcome="stopped" if stopped else "signalled",
        pid=entry.pid,
        process_start=entry.process_start,
        environment=entry.environment,
        reason=f"{' then '.join(signals)}; the engine {done} after {waited:.1f} s; "
        f"engine state {state or 'unknown'}",
    )
    return StopResult(
        experiment_id=files.experiment_id,
        pid=entry.pid,
        signals=signals,
        stopped=stopped,
        waited_s=waited,
        state=state,
        trials_done=data.get("trials_done") if data else None,
        attempt=logged.attempt,
        notes=[problem] if problem else [],
    )
