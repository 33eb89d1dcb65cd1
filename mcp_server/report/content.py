"""What an experiment's report says, gathered from the records alone: the provenance card (the
binding, and whether the environment verifies now), the attempts timeline, the trials from the
engine's ledger and the best trial. Nothing here depends on when the report is made, so the same
records give the same report."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.environment.records import RecordStore
from mcp_server.environment.target import locate
from mcp_server.environment.verify import verify_environment
from mcp_server.errors import ExitCode, SetupError
from mcp_server.experiments.attempts import AttemptEntry, read_attempts
from mcp_server.experiments.binding import Binding, binding_differences, read_binding, relocation
from mcp_server.experiments.files import ExperimentFiles, require_experiment
from mcp_server.experiments.trials import (
    Objective,
    SftOutcome,
    Trial,
    best_trial,
    read_trials,
    sft_outcomes,
)
from mcp_server.redact import redact_text
from mcp_server.values import ExperimentId, TargetPath, WorkspacePath

STEP = "report"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProvenanceCard(_Model):
    """What ran: the exact engine build the experiment is bound to, and whether the
    environment it last ran in still holds exactly that build."""

    experiment_id: str = Field(description="The experiment.")
    repository: str | None = Field(description="Engine repository, credentials stripped.")
    subdirectory: str | None = Field(
        description="Engine subdirectory in its repository; null: a reviewed wheel."
    )
    branch: str | None = Field(description="The ref that was resolved (null: by commit).")
    commit: str | None = Field(description="Engine commit; null: a reviewed wheel.")
    subtree_id: str | None = Field(description="Git tree id of the subdirectory at that commit.")
    distribution: str = Field(description="Engine distribution name.")
    version: str = Field(description="Engine version.")
    wheel_sha256: str = Field(description="sha256 of the engine's wheel.")
    record_digest: str = Field(description="sha256 of the wheel's RECORD file.")
    identity_digest: str = Field(description="Identity digest the experiment is bound to.")
    python: str = Field(description="Python version and implementation of the environment.")
    platform: str = Field(description="Platform the engine was installed for.")
    dependencies: dict[str, str | None] = Field(
        description="Versions of the engine's direct dependencies (null: not installed)."
    )
    watched: dict[str, str | None] = Field(description="Watched packages (gepa, torch).")
    torch_cuda: str | None = Field(description="torch's CUDA build; null: CPU or no torch.")
    manifest_sha256: str = Field(description="sha256 of the manifest the binding holds.")
    launched: str = Field(description="When and where the binding was made.")
    checked_environment: str = Field(description="The environment verified for this report.")
    verifies_now: bool = Field(description="That environment holds exactly the bound build now.")
    verification: list[str] = Field(description="What verification found (empty: it matches).")


class TimelineEntry(_Model):
    attempt: int = Field(description="Attempt number, from 1.")
    time: str = Field(description="When (ISO 8601 UTC).")
    action: str = Field(description="launch, resume, exit, stop, submit or cancel.")
    outcome: str = Field(description="What came of it.")
    host: str = Field(description="Host.")
    pid: int | None = Field(description="The engine's process id, if one ran.")
    exit_code: int | None = Field(description="The engine's exit code, if it exited.")
    environment: str | None = Field(description="Environment the engine ran from.")
    reason: str = Field(description="Why, for a refusal or a stop.")
    details: list[str] = Field(
        description="Every other field the attempts ledger holds for this entry (field "
        "differences, scheduler job, node, generation, ...), as `name: value`."
    )


class ExperimentReport(_Model):
    experiment_id: str = Field(description="The experiment reported.")
    workspace: str = Field(description="Its workspace.")
    card: ProvenanceCard = Field(
        description="The provenance card: the exact engine build it is bound to."
    )
    timeline: list[TimelineEntry] = Field(
        description="Every attempt: launches, resumes, stops, exits, refusals."
    )
    objective: Objective | None = Field(description="From the manifest the engine recorded.")
    trials: list[Trial] = Field(description="Every trial, in order.")
    best: Trial | None = Field(
        description="The best trial by the objective; null before one finished."
    )
    sft: dict[int, SftOutcome] = Field(
        description="By trial index: the SFT outcome of trials of the `sft` workload."
    )
    notes: list[str] = Field(description="Torn ledger lines, a moved workspace, ...")


# The attempts ledger's fields the timeline shows in its own columns; any other non-empty
# field (those of schedulers and later formats included) goes to `details`.
_COLUMNS = frozenset(TimelineEntry.model_fields) | {"schema_version", "identity_digest"}


def _timeline(entries: list[AttemptEntry]) -> list[TimelineEntry]:
    rows = []
    for entry in entries:
        data = entry.model_dump(mode="json")
        details = [
            f"{name}: {_shown(value)}"
            for name, value in data.items()
            if name not in _COLUMNS and value not in (None, "", [], {})
        ]
        rows.append(
            TimelineEntry(
                **{name: data[name] for name in TimelineEntry.model_fields if name in data},
                details=details,
            )
        )
    return rows


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(_shown(v) for v in value)
    if isinstance(value, dict) and {"field", "recorded", "found"} <= value.keys():
        return f"{value['field']}: bound {value['recorded']}, found {value['found']}"
    return str(value)


def _checked_environment(binding: Binding, entries: list[AttemptEntry]) -> str:
    """Where the experiment last ran (the last accepted attempt), else where it was launched."""
    accepted = [e.environment for e in entries if e.outcome == "accepted" and e.environment]
    return accepted[-1] if accepted else binding.engine.environment_path


def _verification(binding: Binding, where: str) -> list[str]:
    """What keeps `where` from holding exactly the bound build now (empty when it does)."""
    try:
        env = locate(TargetPath(where))
        verified = verify_environment(env, binding.engine.build.distribution)
        if verified.status != "verified":
            found = [d.describe() for d in verified.differences] + verified.notes
            return [f"verify: {verified.status}", *found]
        record = RecordStore(env.state_dir).read_record()
        return [d.describe("bound") for d in binding_differences(binding, env, record)]
    except SetupError as exc:
        return [exc.message]


def _card(binding: Binding, where: str) -> ProvenanceCard:
    engine = binding.engine
    src, build, env = engine.source, engine.build, engine.environment
    problems = _verification(binding, where)
    return ProvenanceCard(
        experiment_id=binding.experiment_id,
        repository=src.repository if src is not None else None,
        subdirectory=src.subdirectory if src is not None else None,
        branch=src.requested_ref if src is not None else None,
        commit=src.commit if src is not None else None,
        subtree_id=src.subtree_id if src is not None else None,
        distribution=build.distribution,
        version=build.version,
        wheel_sha256=build.wheel_sha256,
        record_digest=build.record_digest,
        identity_digest=engine.identity_digest,
        python=f"{env.python_version} ({env.implementation})",
        platform=env.platform,
        dependencies=env.dependencies,
        watched=env.watched,
        torch_cuda=env.torch_cuda,
        manifest_sha256=binding.manifest_sha256,
        launched=f"{binding.time} on {binding.host} by automl-setup {binding.tool_version}",
        checked_environment=where,
        verifies_now=not problems,
        verification=problems,
    )


def gather_report(experiment_id: ExperimentId, workspace: WorkspacePath) -> ExperimentReport:
    """The report of exactly this experiment, from its binding, ledgers and engine files."""
    files = ExperimentFiles(workspace.path, experiment_id)
    require_experiment(
        files, STEP, remedy="list experiments with", exit_code=ExitCode.NOTHING_INSTALLED
    )
    binding = read_binding(files)
    entries, torn = read_attempts(files)
    found = read_trials(files)
    notes = [
        note
        for note in (
            relocation(binding, files),
            f"attempts ledger line {torn} is torn (interrupted write)" if torn else None,
            f"engine ledger line {found.torn_line} is torn (interrupted write)"
            if found.torn_line
            else None,
        )
        if note
    ]
    report = ExperimentReport(
        experiment_id=experiment_id,
        workspace=str(files.workspace),
        card=_card(binding, _checked_environment(binding, entries)),
        timeline=_timeline(entries),
        objective=found.objective,
        trials=found.trials,
        best=best_trial(found),
        sft=sft_outcomes(files, found),
        notes=notes,
    )
    # Refusal reasons and notes can quote a URL someone typed: never its credentials.
    return ExperimentReport.model_validate(_redacted(report.model_dump()))


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value
