"""Read-only views of an experiment: status and logs. They never take the lock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from automl_refengine.errors import Refused
from automl_refengine.layout import ExperimentPaths, live_controller_pid, read_recorded_manifest
from automl_refengine.ledger import Event, read_events
from automl_refengine.search import planned_trial_count
from automl_refengine.state import ExperimentState, replay
from automl_refengine.trial import STDERR_LOG, STDOUT_LOG


def _require_experiment(paths: ExperimentPaths) -> None:
    if not paths.manifest.exists():
        raise Refused(f"no experiment {paths.experiment_id!r} in {paths.workspace}")


def status_report(paths: ExperimentPaths, state: ExperimentState | None = None) -> dict[str, Any]:
    """Status replayed from the ledger; `state` skips the replay when the caller has it."""
    _require_experiment(paths)
    manifest = read_recorded_manifest(paths)
    pid = live_controller_pid(paths)
    if state is None:
        events = read_events(paths.ledger, live_writer=pid is not None)
        state = replay(events, paths.experiment_id, manifest.search.objective)
    current, stop_reason = state.state, state.stop_reason
    if current == "running" and pid is None:
        # The ledger says running but nobody is: the controller was killed.
        current, stop_reason = "interrupted", "controller died"
    budget = manifest.search.budget
    return {
        "experiment_id": paths.experiment_id,
        "experiment_dir": str(paths.root),
        "state": current,
        "stop_reason": stop_reason,
        "controller_pid": pid,
        "cancel_requested": paths.cancel.exists(),
        "trials_done": state.finished_trials,
        "trials_succeeded": state.succeeded_trials,
        "trials_failed": state.failed_trials,
        "planned_trials": planned_trial_count(manifest.search),
        "sessions": state.sessions,
        "elapsed_s": round(state.elapsed_s, 3),
        "total_timeout_s": budget.total_timeout_s,
        "objective": manifest.search.objective.model_dump(),
        "best": state.best.model_dump(mode="json") if state.best else None,
    }


def read_ledger(paths: ExperimentPaths) -> list[Event]:
    _require_experiment(paths)
    return read_events(paths.ledger, live_writer=live_controller_pid(paths) is not None)


@dataclass(frozen=True)
class TrialLogs:
    index: int
    trial_dir: str
    stdout: str
    stderr: str


def trial_logs(paths: ExperimentPaths, index: int) -> TrialLogs:
    """stdout and stderr of the latest attempt of trial `index`."""
    _require_experiment(paths)
    trial_dir = paths.trial_dir(index)
    if not trial_dir.is_dir():
        raise Refused(f"trial {index} of {paths.experiment_id} has not started")

    def text(name: str) -> str:
        path = trial_dir / name
        return path.read_text(errors="replace") if path.exists() else ""

    return TrialLogs(index, str(trial_dir), text(STDOUT_LOG), text(STDERR_LOG))
