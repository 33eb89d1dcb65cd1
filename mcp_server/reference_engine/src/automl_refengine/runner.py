"""The controller: plan, run, resume and cancel an experiment.

Trials run one at a time, in index order. Trial `index` always gets
`trial_params(search, index)`, so an interrupted and resumed experiment runs
exactly the trials an uninterrupted one would.

Budget: `max_trials` counts finished trials, succeeded or failed (a failed trial is
not retried). An interrupted attempt is not finished and does not count; it is
re-run. Total elapsed time is the sum over controller sessions of each session's
last recorded `session_elapsed_s`, so resume continues the clock instead of
resetting it (time after a SIGKILLed session's last event is lost, which only ever
gives the experiment more time, never less).

Reconciliation on resume:
- A trial with `trial_started` but neither `trial_finished` nor
  `trial_interrupted` was in flight when its controller died. It is recorded as
  `trial_interrupted` (reason `reconciled`) and re-run with the same index and
  params as its next attempt. A metrics file it may have left is NOT adopted: its
  exit status is unknown and the file may be partial or written by a process that
  was then killed. Its directory is kept as `trial-NNNNN.prev-K` for inspection.
- If that trial's process group (its pid, recorded as `pgid`) is still alive, the
  old trial is still running unsupervised: resume refuses until it is gone.
- Resume also refuses when manifest.json, ledger.jsonl or the lock file is missing,
  when the ledger is torn or does not replay, when state.json is not the replay of
  the ledger (or of all but its last event), when the given manifest differs from
  the recorded one, when the engine computes different params for a recorded trial,
  when the experiment was cancelled, and when it already completed or failed.

Signals: SIGTERM or SIGINT stop launching trials, terminate the running trial's
process group, record `trial_interrupted` and `session_ended`, save state and exit
128 + signal number (143, 130). A cancel request (cancel.json, usually followed by
SIGTERM from `cancel`) records `experiment_cancelled` instead and exits 1.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from automl_refengine import __version__
from automl_refengine.allocation import Allocation, requeue
from automl_refengine.durable import atomic_write_json, fsync_dir
from automl_refengine.errors import CorruptState, ExitCode, Refused
from automl_refengine.layout import (
    ExperimentLock,
    ExperimentPaths,
    live_controller_pid,
    read_recorded_manifest,
    write_recorded_manifest,
)
from automl_refengine.ledger import (
    E,
    Event,
    ExperimentCancelled,
    ExperimentFinished,
    LedgerWriter,
    SessionEnded,
    SessionStarted,
    TrialFinished,
    TrialInterrupted,
    TrialStarted,
    read_events,
    utc_now,
)
from automl_refengine.manifest import (
    Manifest,
    ParamValue,
    canonical_json,
    expand_argv,
    manifest_sha256,
)
from automl_refengine.search import planned_trial_count, trial_params
from automl_refengine.state import Best, ExperimentState, apply, replay
from automl_refengine.trial import StopRequest, TrialOutcome, launch, supervise, trial_env

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PlannedTrial:
    index: int
    params: dict[str, ParamValue]
    argv: list[str]


@dataclass(frozen=True)
class RunResult:
    state: ExperimentState
    exit_code: ExitCode
    message: str


def plan(manifest: Manifest, workspace: Path) -> list[PlannedTrial]:
    """The trials `run` would launch, computed without touching the filesystem."""
    paths = ExperimentPaths(workspace, manifest.search.experiment_id)
    planned = []
    for index in range(planned_trial_count(manifest.search)):
        params = trial_params(manifest.search, index)
        assert params is not None  # planned_trial_count stops at the end of a grid
        argv = expand_argv(manifest.workload.argv, paths.trial_dir(index), paths.params_file(index))
        planned.append(PlannedTrial(index, params, argv))
    return planned


class _Controller:
    """One controller session, holding the experiment lock for its whole life."""

    def __init__(
        self,
        paths: ExperimentPaths,
        manifest: Manifest,
        state: ExperimentState | None,
        ledger: LedgerWriter,
        progress: Progress,
        allocation: Allocation | None = None,
    ) -> None:
        self.allocation = allocation
        self.paths = paths
        self.manifest = manifest
        self.state = state
        self.ledger = ledger
        self.progress = progress
        self.session = state.sessions + 1 if state else 1
        self.started = time.monotonic()
        self.signal: signal.Signals | None = None
        self.best_written: Best | None = None

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # Only set a flag: the loop stops at its next check, never mid-write.
        if self.signal is None:
            self.signal = signal.Signals(signum)

    def _stop_requested(self) -> StopRequest | None:
        # Cancel first: `cancel` writes cancel.json before it sends SIGTERM.
        if self.paths.cancel.exists():
            return "cancel"
        return "signal" if self.signal is not None else None

    def _record(self, kind: type[E], **fields: Any) -> E:
        elapsed = round(time.monotonic() - self.started, 6)
        event = self.ledger.append(kind, session=self.session, session_elapsed_s=elapsed, **fields)
        self.state = apply(self.state, event, self.manifest.search.objective)
        self._persist()
        return event

    def _persist(self) -> None:
        assert self.state is not None
        atomic_write_json(self.paths.state, self.state.model_dump(mode="json"))
        if self.state.best is not None and self.state.best != self.best_written:
            atomic_write_json(self.paths.best, self.state.best.model_dump(mode="json"))
            self.best_written = self.state.best

    def _elapsed(self) -> float:
        assert self.state is not None
        return self.state.elapsed_before_session_s + (time.monotonic() - self.started)

    def drive(self, mode: Literal["run", "resume"]) -> RunResult:
        # SIGUSR1 is a SLURM controller job's warning before its time limit (allocation.py).
        stops = (signal.SIGTERM, signal.SIGINT) + ((signal.SIGUSR1,) if self.allocation else ())
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in stops}
        atomic_write_json(
            self.paths.controller,
            {"pid": os.getpid(), "session": self.session, "started_at": utc_now()},
        )
        try:
            self._record(
                SessionStarted,
                experiment_id=self.paths.experiment_id,
                mode=mode,
                pid=os.getpid(),
                engine_version=__version__,
                manifest_sha256=manifest_sha256(self.manifest),
            )
            self._reconcile()
            return self._loop()
        finally:
            self.paths.controller.unlink(missing_ok=True)
            self.ledger.close()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _reconcile(self) -> None:
        assert self.state is not None
        running = self.state.running_trial
        if running is not None:
            self._record(
                TrialInterrupted,
                index=running.index,
                attempt=running.attempts,
                reason="reconciled",
                detail="no finish event: its controller died; re-running the same params",
            )
            self.progress(
                f"trial {running.index:05d} was in flight: marked interrupted, re-running"
            )

    def _loop(self) -> RunResult:
        """Launch trials until a stop request, the budget or the grid ends the session."""
        search = self.manifest.search
        while True:
            assert self.state is not None
            stop = self._stop_requested()
            if stop == "cancel":
                return self._cancelled()
            if stop == "signal":
                return self._interrupted()
            index = self.state.finished_trials
            if index >= search.budget.max_trials:
                return self._finish("max_trials")
            params = trial_params(search, index)
            if params is None:
                return self._finish("grid_exhausted")
            if self._elapsed() >= search.budget.total_timeout_s:
                return self._finish("total_timeout")
            outcome = self._run_trial(index, params)
            if outcome.reason == "total_timeout":
                return self._finish("total_timeout")

    def _set_aside(self, trial_dir: Path) -> None:
        """Keep an earlier attempt's files: never delete evidence."""
        k = 1
        while (aside := trial_dir.with_name(f"{trial_dir.name}.prev-{k}")).exists():
            k += 1
        trial_dir.rename(aside)
        fsync_dir(trial_dir.parent)

    def _run_trial(self, index: int, params: dict[str, ParamValue]) -> TrialOutcome:
        assert self.state is not None
        budget = self.manifest.search.budget
        previous = self.state.trials[index] if index < len(self.state.trials) else None
        attempt = previous.attempts + 1 if previous else 1
        trial_dir = self.paths.trial_dir(index)
        if trial_dir.exists():
            self._set_aside(trial_dir)
        trial_dir.mkdir()
        params_path = self.paths.params_file(index)
        atomic_write_json(params_path, params)
        argv = expand_argv(self.manifest.workload.argv, trial_dir, params_path)
        started = time.monotonic()
        common = {"index": index, "attempt": attempt}
        try:
            proc = launch(argv, trial_dir, trial_env(self.manifest.execution.pass_env))
        except OSError as exc:
            self._record(TrialStarted, **common, params=params, argv=argv, pgid=None)
            outcome = TrialOutcome("failed", "launch_error", 0.0, detail=f"cannot launch: {exc}")
        else:
            self._record(TrialStarted, **common, params=params, argv=argv, pgid=proc.pid)
            outcome = supervise(
                proc,
                trial_deadline=started + budget.trial_timeout_s,
                total_deadline=self.started
                + budget.total_timeout_s
                - self.state.elapsed_before_session_s,
                stop_requested=self._stop_requested,
                metrics_path=trial_dir / self.manifest.workload.metrics_file,
                metric=self.manifest.search.objective.metric,
            )
        if outcome.status == "interrupted":
            detail = self.signal.name if outcome.reason == "signal" and self.signal else "cancel"
            self._record(TrialInterrupted, **common, reason=outcome.reason, detail=detail)
            self.progress(f"trial {index:05d} interrupted ({detail})")
            return outcome
        self._record(
            TrialFinished,
            **common,
            status=outcome.status,
            reason=outcome.reason,
            value=outcome.value,
            metrics=outcome.metrics,
            returncode=outcome.returncode,
            duration_s=outcome.duration_s,
            detail=outcome.detail,
        )
        metric = self.manifest.search.objective.metric
        result = f"{metric}={outcome.value:.6g}" if outcome.value is not None else outcome.detail
        self.progress(f"trial {index:05d} {outcome.status} {result} ({outcome.duration_s:.2f} s)")
        return outcome

    def _finish(self, stop_reason: str) -> RunResult:
        assert self.state is not None
        final = "completed" if self.state.best is not None else "failed"
        self._record(ExperimentFinished, state=final, stop_reason=stop_reason)
        self._record(SessionEnded, reason="finished", signal=None)
        code = ExitCode.OK if final == "completed" else ExitCode.REFUSED
        why = "" if final == "completed" else ": no trial succeeded"
        return RunResult(self.state, code, f"experiment {final} ({stop_reason}){why}")

    def _interrupted(self) -> RunResult:
        assert self.state is not None and self.signal is not None
        self._record(SessionEnded, reason="signal", signal=self.signal.name)
        codes = {signal.SIGINT: ExitCode.SIGINT, signal.SIGUSR1: ExitCode.SIGUSR1}
        message = f"interrupted by {self.signal.name}; state saved, `resume` continues"
        if self.signal == signal.SIGUSR1 and self.allocation is not None:
            message += "; " + self._next_allocation()
        return RunResult(self.state, codes.get(self.signal, ExitCode.SIGTERM), message)

    def _next_allocation(self) -> str:
        """After the warning signal, with everything recorded: requeue this job when the cap
        allows another allocation and work remains."""
        assert self.allocation is not None and self.state is not None
        search = self.manifest.search
        index = self.state.finished_trials
        remains = (
            index < search.budget.max_trials
            and trial_params(search, index) is not None
            and self._elapsed() < search.budget.total_timeout_s
        )
        if not remains:
            return "no work remains: not requeued"
        if not self.allocation.may_requeue:
            return (
                f"not requeued: generation {self.allocation.generation} is the last the cap "
                f"{self.allocation.cap} allows"
            )
        # Said first: the scheduler's SIGTERM that follows may end this process before it
        # prints its summary (everything is recorded by now).
        self.progress(f"requeueing job {self.allocation.job_id} (warning signal)")
        return requeue(self.allocation)

    def _cancelled(self) -> RunResult:
        self._record(ExperimentCancelled, source="controller")
        self._record(SessionEnded, reason="cancelled", signal=None)
        assert self.state is not None
        return RunResult(self.state, ExitCode.REFUSED, "experiment cancelled")


def _refuse_if_holds_state(paths: ExperimentPaths) -> None:
    if paths.holds_state():
        raise Refused(f"{paths.root} already holds an experiment; use `resume` to continue it")


def run_experiment(
    manifest: Manifest, workspace: Path, progress: Progress, allocation: Allocation | None = None
) -> RunResult:
    paths = ExperimentPaths(workspace, manifest.search.experiment_id)
    _refuse_if_holds_state(paths)
    paths.root.mkdir(parents=True, exist_ok=True)
    lock = ExperimentLock(paths.lock, create=True)
    try:
        _refuse_if_holds_state(paths)  # again under the lock: another `run` may have won
        write_recorded_manifest(paths, manifest)
        ledger = LedgerWriter(paths.ledger, next_seq=1)
        return _Controller(paths, manifest, None, ledger, progress, allocation).drive("run")
    finally:
        lock.release()


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, canonical_json(value)


def _manifest_diff(recorded: Manifest, given: Manifest) -> list[str]:
    old = dict(_flatten(recorded.model_dump(mode="json")))
    new = dict(_flatten(given.model_dump(mode="json")))
    return [
        f"{key}: recorded {old.get(key, '(absent)')}, given {new.get(key, '(absent)')}"
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def _check_snapshot(paths: ExperimentPaths, events: list[Event], manifest: Manifest) -> None:
    """state.json must be the replay of the ledger, or of all but its last event."""
    objective = manifest.search.objective
    if not paths.state.exists():
        if len(events) > 1:
            raise CorruptState(f"{paths.state} is missing")
        return  # the first controller died between its first event and its first snapshot
    try:
        snapshot = ExperimentState.model_validate_json(paths.state.read_bytes())
    except ValueError as exc:
        raise CorruptState(f"{paths.state} is unreadable: {str(exc).splitlines()[0]}") from None
    if snapshot.ledger_events not in (len(events) - 1, len(events)) or snapshot.ledger_events < 1:
        raise CorruptState(
            f"{paths.state} reflects {snapshot.ledger_events} ledger events "
            f"but the ledger holds {len(events)}"
        )
    expected = replay(events[: snapshot.ledger_events], paths.experiment_id, objective)
    if snapshot != expected:
        raise CorruptState(f"{paths.state} disagrees with the ledger it claims to reflect")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _load_for_resume(paths: ExperimentPaths, manifest: Manifest) -> ExperimentState:
    recorded = read_recorded_manifest(paths)
    diff = _manifest_diff(recorded, manifest)
    if diff:
        raise Refused(
            "the manifest differs from the one this experiment was started with:\n  "
            + "\n  ".join(diff)
        )
    events = read_events(paths.ledger)
    state = replay(events, paths.experiment_id, manifest.search.objective)
    _check_snapshot(paths, events, manifest)
    if state.state == "cancelled" or paths.cancel.exists():
        raise Refused(f"experiment {paths.experiment_id} was cancelled; it cannot be resumed")
    if state.state in ("completed", "failed"):
        raise Refused(f"experiment {paths.experiment_id} already {state.state}; nothing to resume")
    for trial in state.trials:
        expected = trial_params(manifest.search, trial.index)
        if expected != trial.params:
            raise CorruptState(
                f"trial {trial.index} ran with params {trial.params} but this engine computes "
                f"{expected}; the search algorithm differs, refusing"
            )
    running = state.running_trial
    if running is not None and running.pgid is not None and _group_alive(running.pgid):
        raise Refused(
            f"trial {running.index} of the previous controller is still running as process "
            f"group {running.pgid}; wait for it or stop it (`kill -TERM -- -{running.pgid}`), "
            "then resume"
        )
    return state


def resume_experiment(
    manifest: Manifest, workspace: Path, progress: Progress, allocation: Allocation | None = None
) -> RunResult:
    paths = ExperimentPaths(workspace, manifest.search.experiment_id)
    if not paths.manifest.exists():
        raise Refused(f"{paths.root} holds no experiment to resume; `run` starts one")
    try:
        lock = ExperimentLock(paths.lock, create=False)
    except FileNotFoundError:
        raise CorruptState(f"{paths.lock} is missing") from None
    try:
        state = _load_for_resume(paths, manifest)
        ledger = LedgerWriter(paths.ledger, next_seq=state.ledger_events + 1)
        controller = _Controller(paths, manifest, state, ledger, progress, allocation)
        return controller.drive("resume")
    finally:
        lock.release()


def cancel_experiment(paths: ExperimentPaths) -> str:
    """Cancel durably: cancel.json, then either record it or have the live controller do so."""
    if not paths.manifest.exists():
        raise Refused(f"no experiment {paths.experiment_id!r} in {paths.workspace}")
    manifest = read_recorded_manifest(paths)
    try:
        lock = ExperimentLock(paths.lock, create=False)
    except FileNotFoundError:
        raise CorruptState(f"{paths.lock} is missing") from None
    except Refused:
        # A controller holds the lock: it records the cancel when it sees cancel.json.
        atomic_write_json(paths.cancel, {"requested_at": utc_now(), "pid": os.getpid()})
        pid = live_controller_pid(paths)
        if pid is None:
            return "cancel requested; the controller records it at its next check"
        os.kill(pid, signal.SIGTERM)
        return f"cancel requested; sent SIGTERM to controller pid {pid}, which records it"
    try:
        events = read_events(paths.ledger)
        state = replay(events, paths.experiment_id, manifest.search.objective)
        if state.state == "cancelled":
            return f"experiment {paths.experiment_id} was already cancelled"
        if state.state in ("completed", "failed"):
            raise Refused(f"experiment {paths.experiment_id} already {state.state}")
        atomic_write_json(paths.cancel, {"requested_at": utc_now(), "pid": os.getpid()})
        ledger = LedgerWriter(paths.ledger, next_seq=len(events) + 1)
        try:
            event = ledger.append(ExperimentCancelled, source="cancel_command")
        finally:
            ledger.close()
        state = apply(state, event, manifest.search.objective)
        atomic_write_json(paths.state, state.model_dump(mode="json"))
        return f"experiment {paths.experiment_id} cancelled"
    finally:
        lock.release()
