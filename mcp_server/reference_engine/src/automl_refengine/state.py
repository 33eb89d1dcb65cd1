"""Experiment state as a pure fold over the ledger.

The controller applies each event it appends and writes the result to `state.json`,
so `state.json` always equals the replay of a prefix of the ledger (the whole ledger,
or all but its last event if the controller died between the two writes). Every
transition is checked; an event that does not fit the history is corruption.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from automl_refengine.errors import CorruptState
from automl_refengine.ledger import (
    Event,
    ExperimentCancelled,
    ExperimentFinished,
    SessionEnded,
    SessionStarted,
    TrialFinished,
    TrialInterrupted,
    TrialStarted,
)
from automl_refengine.manifest import Objective, ParamValue

ExperimentStatus = Literal["running", "interrupted", "completed", "cancelled", "failed"]
TERMINAL: tuple[ExperimentStatus, ...] = ("completed", "cancelled", "failed")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrialRecord(_Model):
    index: int
    attempts: int
    params: dict[str, ParamValue]
    status: Literal["running", "interrupted", "succeeded", "failed"]
    pgid: int | None
    value: float | None = None
    reason: str | None = None


class Best(_Model):
    index: int
    params: dict[str, ParamValue]
    value: float
    metric: str
    direction: Literal["minimize", "maximize"]


class ExperimentState(_Model):
    schema_version: Literal[1] = 1
    experiment_id: str
    manifest_sha256: str
    state: ExperimentStatus
    stop_reason: str | None = None
    ledger_events: int = 0
    sessions: int = 0
    session_open: bool = False
    # Sum of the sessions before the current one; elapsed_s adds the current one.
    elapsed_before_session_s: float = 0.0
    elapsed_s: float = 0.0
    trials: list[TrialRecord] = []
    best: Best | None = None
    updated_at: str | None = None

    @property
    def finished_trials(self) -> int:
        return sum(t.status in ("succeeded", "failed") for t in self.trials)

    @property
    def succeeded_trials(self) -> int:
        return sum(t.status == "succeeded" for t in self.trials)

    @property
    def failed_trials(self) -> int:
        return sum(t.status == "failed" for t in self.trials)

    @property
    def running_trial(self) -> TrialRecord | None:
        return next((t for t in self.trials if t.status == "running"), None)


def _better(value: float, best: Best | None, objective: Objective) -> bool:
    if best is None:
        return True
    # Strictly better only: on a tie the earlier trial stays best, deterministically.
    return value < best.value if objective.direction == "minimize" else value > best.value


def _corrupt(event: Event, why: str) -> CorruptState:
    return CorruptState(f"ledger event {event.seq} ({event.event}) does not fit the history: {why}")


def _trial(state: ExperimentState, event: TrialFinished | TrialInterrupted) -> TrialRecord:
    running = state.running_trial
    if running is None or running.index != event.index or running.attempts != event.attempt:
        raise _corrupt(event, f"trial {event.index} attempt {event.attempt} is not running")
    return running


def _start_trial(state: ExperimentState, event: TrialStarted) -> None:
    if state.running_trial is not None:
        raise _corrupt(event, f"trial {state.running_trial.index} is still running")
    if event.index == len(state.trials) and event.attempt == 1:
        record = TrialRecord(
            index=event.index, attempts=1, params=event.params, status="running", pgid=event.pgid
        )
        state.trials.append(record)
        return
    previous = state.trials[event.index] if event.index < len(state.trials) else None
    if (
        previous is None
        or previous.status != "interrupted"
        or event.attempt != previous.attempts + 1
        or event.params != previous.params
    ):
        raise _corrupt(event, f"trial {event.index} attempt {event.attempt} is out of order")
    previous.attempts, previous.status, previous.pgid = event.attempt, "running", event.pgid


def _check_session(state: ExperimentState, event: Event) -> None:
    """Controller events must belong to the open session of a running experiment."""
    if isinstance(event, SessionStarted):
        if state.state in TERMINAL:
            raise _corrupt(event, f"the experiment is already {state.state}")
        expected_mode = "run" if state.sessions == 0 else "resume"
        if event.session != state.sessions + 1 or event.mode != expected_mode:
            raise _corrupt(event, f"expected session {state.sessions + 1} ({expected_mode})")
        if (event.experiment_id, event.manifest_sha256) != (
            state.experiment_id,
            state.manifest_sha256,
        ):
            raise _corrupt(event, "experiment id or manifest digest differs from session 1")
        return
    if event.session is None:
        return  # written by the cancel command, outside any session
    if event.session != state.sessions or not state.session_open:
        raise _corrupt(event, f"session {event.session} is not the open session")
    if not isinstance(event, SessionEnded | ExperimentCancelled) and state.state != "running":
        raise _corrupt(event, f"the experiment is {state.state}, not running")


def apply(state: ExperimentState | None, event: Event, objective: Objective) -> ExperimentState:
    """The state after `event` as a new object; `state` is None before the first event."""
    return _fold(None if state is None else state.model_copy(deep=True), event, objective)


def _fold(state: ExperimentState | None, event: Event, objective: Objective) -> ExperimentState:
    """Apply `event` to `state` in place (a replay copies nothing: linear in the ledger)."""
    if state is None:
        if not isinstance(event, SessionStarted):
            raise CorruptState(f"ledger starts with {event.event}, not session_started")
        state = ExperimentState(
            experiment_id=event.experiment_id,
            manifest_sha256=event.manifest_sha256,
            state="running",
        )
    _check_session(state, event)
    if isinstance(event, SessionStarted):
        state.sessions += 1
        state.session_open = True
        state.elapsed_before_session_s = state.elapsed_s
        state.state = "running"
        state.stop_reason = None

    if isinstance(event, TrialStarted):
        _start_trial(state, event)
    elif isinstance(event, TrialFinished):
        trial = _trial(state, event)
        trial.status, trial.value, trial.reason = event.status, event.value, event.reason
        if event.status == "succeeded":
            if event.value is None:
                raise _corrupt(event, "a succeeded trial without a value")
            if _better(event.value, state.best, objective):
                state.best = Best(
                    index=trial.index,
                    params=trial.params,
                    value=event.value,
                    metric=objective.metric,
                    direction=objective.direction,
                )
    elif isinstance(event, TrialInterrupted):
        trial = _trial(state, event)
        trial.status, trial.reason = "interrupted", event.reason
    elif isinstance(event, ExperimentFinished):
        if state.running_trial is not None:
            raise _corrupt(event, "a trial is still running")
        state.state, state.stop_reason = event.state, event.stop_reason
    elif isinstance(event, ExperimentCancelled):
        if state.state in TERMINAL:
            raise _corrupt(event, f"the experiment is already {state.state}")
        if state.running_trial is not None and event.source == "controller":
            raise _corrupt(event, "the controller cancelled with a trial still running")
        # A cancel command after a SIGKILLed controller leaves that trial interrupted.
        for trial in state.trials:
            if trial.status == "running":
                trial.status, trial.reason = "interrupted", "cancel"
        state.state, state.stop_reason = "cancelled", "cancelled"
    elif isinstance(event, SessionEnded):
        state.session_open = False
        if state.running_trial is not None:
            raise _corrupt(event, "a trial is still running")
        if event.reason == "signal":
            state.state, state.stop_reason = "interrupted", f"signal {event.signal}"
        elif state.state not in TERMINAL:
            raise _corrupt(
                event, f"session ended as {event.reason} but the experiment is {state.state}"
            )

    if event.session_elapsed_s is not None:
        state.elapsed_s = state.elapsed_before_session_s + event.session_elapsed_s
    state.ledger_events = event.seq
    state.updated_at = event.time
    return state


def replay(events: list[Event], experiment_id: str, objective: Objective) -> ExperimentState:
    if not events:
        raise CorruptState("the ledger is empty")
    state: ExperimentState | None = None
    for event in events:
        state = _fold(state, event, objective)
    assert state is not None
    if state.experiment_id != experiment_id:
        raise CorruptState(f"the ledger belongs to experiment {state.experiment_id!r}")
    return state
