"""The trials of an experiment as its engine's own ledger tells them, read from the files the
engine keeps in `<workspace>/<experiment_id>/` (no engine process needed, so a report can be
made after the environment is gone):

    ledger.jsonl    one event per line; the trial events (`trial_started`, `trial_finished`,
                    `trial_interrupted`) are read strictly, the other events are the engine's
    manifest.json   the manifest the engine recorded: the objective (metric, direction) and
                    the name of each trial's metrics file
    trial-NNNNN/    the latest attempt of trial NNNNN: its metrics file (the `sft` workload's
                    holds its score, rollbacks and the sha256 of its merged export)

The engine owns these formats, so fields it adds later are ignored rather than refused, while
every field read here must have its exact type (no coercion). A torn last line is reported.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server.errors import SetupError
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.fsutil import read_file, read_json_lines
from mcp_server.persisted import describe_error

ParamValue = bool | int | float | str
TrialState = Literal["running", "interrupted", "succeeded", "failed"]
MAX_METRICS_BYTES = 1_000_000  # the engine reads no larger metrics file either
REMEDY = "the engine's files are never rewritten by automl-setup; restore them from a backup"


class _EngineRecord(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class _TrialEvent(_EngineRecord):
    time: str
    index: int = Field(ge=0)
    attempt: int = Field(ge=1)


class _Started(_TrialEvent):
    params: dict[str, ParamValue]


class _Finished(_TrialEvent):
    status: Literal["succeeded", "failed"]
    reason: str
    value: float | None
    metrics: dict[str, float]
    duration_s: float
    detail: str


class _Interrupted(_TrialEvent):
    reason: str


_EVENTS: dict[str, type[_TrialEvent]] = {
    "trial_started": _Started,
    "trial_finished": _Finished,
    "trial_interrupted": _Interrupted,
}


class Objective(_EngineRecord):
    metric: str = Field(description="The metric optimised.")
    direction: Literal["minimize", "maximize"] = Field(
        description="Whether lower (minimize) or higher (maximize) is better."
    )


class _Search(_EngineRecord):
    objective: Objective


class _Workload(_EngineRecord):
    metrics_file: str


class _Manifest(_EngineRecord):
    search: _Search
    workload: _Workload


class _Recorded(_EngineRecord):
    manifest: _Manifest


class SftOutcome(_EngineRecord):
    """What the reference engine's `sft` workload writes in a trial's metrics file (its
    score on the held-out questions, the loss-spike rollbacks, the merged export's digest)."""

    score: int = Field(description="Held-out questions answered right.")
    questions: int = Field(description="Held-out questions asked.")
    steps: int = Field(description="Training steps run.")
    rollbacks: int = Field(description="Loss-spike rollbacks taken.")
    export_dir: str = Field(description="The candidate's exported model folder.")
    export_sha256: str = Field(description="sha256 over the exported files.")


class Trial(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(description="Trial number, from 0.")
    attempts: int = Field(description="How many times the trial was started (resumes re-run it).")
    params: dict[str, ParamValue] = Field(description="The hyperparameters it ran with.")
    state: TrialState = Field(description="The engine's state of the trial.")
    value: float | None = Field(description="The objective's value (succeeded trials only).")
    metrics: dict[str, float] = Field(description="Every numeric metric of the trial.")
    duration_s: float | None = Field(description="Seconds of its last, finished attempt.")
    started: str = Field(description="UTC time its last attempt started, from the ledger.")
    detail: str = Field(description="Why it failed or was interrupted; empty when it succeeded.")


class EngineTrials(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ledger: str = Field(description="The engine's ledger the trials were read from.")
    objective: Objective | None = Field(description="From the manifest the engine recorded.")
    metrics_file: str | None = Field(description="Each trial's metrics file, in its directory.")
    trials: list[Trial]
    torn_line: int | None = Field(description="Line number of a torn (interrupted) write.")


def _recorded_manifest(files: ExperimentFiles) -> _Manifest | None:
    path = files.engine_dir / "manifest.json"
    raw = read_file(path)
    if raw is None:
        return None
    try:
        manifest = _Recorded.model_validate_json(raw).manifest
    except ValidationError as exc:
        cause = f"{path} is not the engine's manifest ({describe_error(exc)})"
        raise SetupError("read trials", cause, REMEDY) from None
    name = PurePosixPath(manifest.workload.metrics_file)
    if name.is_absolute() or ".." in name.parts:  # the engine refuses these; so do we
        raise SetupError("read trials", f"{path} names a metrics file outside its trial", REMEDY)
    return manifest


def _event(raw: Any, ledger: str, line: int) -> _TrialEvent | None:
    if not isinstance(raw, dict):
        cause = f"{ledger} line {line} is not a JSON object"
        raise SetupError("read trials", cause, REMEDY)
    kind = _EVENTS.get(str(raw.get("event")))
    if kind is None:
        return None  # sessions, the experiment's end: the attempts ledger tells those
    try:
        return kind.model_validate(raw)
    except ValidationError as exc:
        cause = f"{ledger} line {line} is not a valid {raw['event']} event ({describe_error(exc)})"
        raise SetupError("read trials", cause, REMEDY) from None


def _apply(trials: dict[int, Trial], event: _TrialEvent) -> None:
    if isinstance(event, _Started):
        trials[event.index] = Trial(
            index=event.index,
            attempts=event.attempt,
            params=event.params,
            state="running",
            value=None,
            metrics={},
            duration_s=None,
            started=event.time,
            detail="",
        )
        return
    trial = trials.get(event.index)
    if trial is None:
        return  # an end without its start: nothing to show for it
    if isinstance(event, _Finished):
        failed = "" if event.status == "succeeded" else f"{event.reason}: {event.detail}"
        trials[event.index] = trial.model_copy(
            update={
                "state": event.status,
                "value": event.value,
                "metrics": event.metrics,
                "duration_s": event.duration_s,
                "detail": failed,
            }
        )
    elif isinstance(event, _Interrupted):
        update = {"state": "interrupted", "detail": event.reason}
        trials[event.index] = trial.model_copy(update=update)


def read_trials(files: ExperimentFiles) -> EngineTrials:
    """Every trial the engine's ledger names, in index order, with its latest attempt."""
    ledger = files.engine_dir / "ledger.jsonl"
    lines = read_json_lines(ledger, what="engine ledger")
    trials: dict[int, Trial] = {}
    for number, raw in enumerate(lines.entries, start=1):
        event = _event(raw, str(ledger), number)
        if event is not None:
            _apply(trials, event)
    manifest = _recorded_manifest(files)
    return EngineTrials(
        ledger=str(ledger),
        objective=manifest.search.objective if manifest is not None else None,
        metrics_file=manifest.workload.metrics_file if manifest is not None else None,
        trials=[trials[i] for i in sorted(trials)],
        torn_line=lines.torn_line,
    )


def best_trial(found: EngineTrials) -> Trial | None:
    """The succeeded trial with the best objective value (the earlier one on a tie, as the
    engine decides it)."""
    done = [t for t in found.trials if t.state == "succeeded" and t.value is not None]
    if not done or found.objective is None:
        return None
    sign = 1.0 if found.objective.direction == "minimize" else -1.0
    return min(done, key=lambda t: (sign * (t.value or 0.0), t.index))


def sft_outcomes(files: ExperimentFiles, found: EngineTrials) -> dict[int, SftOutcome]:
    """The SFT outcome of every succeeded trial whose metrics file holds one (none for other
    workloads): read from the file itself, since the ledger keeps numbers only."""
    outcomes: dict[int, SftOutcome] = {}
    for trial in found.trials:
        if trial.state != "succeeded" or found.metrics_file is None:
            continue
        path = files.engine_dir / f"trial-{trial.index:05d}" / found.metrics_file
        raw = read_file(path) if path.is_file() else None
        if raw is None or len(raw) > MAX_METRICS_BYTES:
            continue
        try:
            outcomes[trial.index] = SftOutcome.model_validate_json(raw)
        except ValidationError:
            continue  # another workload's metrics: nothing of SFT to show
    return outcomes
