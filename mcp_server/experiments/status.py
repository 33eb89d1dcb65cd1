"""The status of an experiment (its binding, ledger, lock and the engine's own answer) and the
listing of a workspace's experiments."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.experiments.answers import Asked, Known, engine_answers
from mcp_server.experiments.attempts import AttemptEntry, read_attempts
from mcp_server.experiments.binding import (
    bound_commit,
    read_binding,
    relocation,
    resume_command,
)
from mcp_server.experiments.bound import bound_to
from mcp_server.experiments.files import (
    SIDECAR,
    ExperimentFiles,
    lock_is_held,
    require_experiment,
)
from mcp_server.experiments.pages import cursor_position, experiment_names, make_cursor, page
from mcp_server.experiments.trials import Trial
from mcp_server.requests import ListQuery, StatusQuery
from mcp_server.values import ExperimentId

ExperimentState = Literal["running", "interrupted", "completed", "cancelled", "failed", "unknown"]
STATES: tuple[str, ...] = get_args(ExperimentState)


class ExperimentStatus(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment's exact id.")
    workspace: str = Field(description="The workspace it was read in (the one asked about).")
    state: ExperimentState = Field(
        description="The engine's state; running only while an engine holds the controller lock."
    )
    controller_running: bool = Field(description="An engine process holds the controller lock.")
    trials_done: int | None = Field(description="Finished trials, from the engine's status.")
    planned_trials: int | None = Field(description="Trials the search plans in all.")
    best: dict[str, Any] | None = Field(description="The engine's best trial so far.")
    trials: list[Trial] = Field(
        default_factory=list, description="Every trial the engine's ledger names, by index."
    )
    resume_command: str | None = Field(
        None, description="The exact command that continues an interrupted experiment."
    )
    bound_commit: str | None = Field(
        description="Commit of the engine build it is bound to (null: a reviewed wheel)."
    )
    bound_ref: str | None = Field(description="The ref that commit was installed from.")
    bound_environment: str = Field(description="The environment it was launched in.")
    identity_digest: str = Field(description="Identity digest of the bound engine build.")
    last_attempt: AttemptEntry | None = Field(description="The newest attempts ledger entry.")
    attempts_torn_line: int | None = Field(
        None, description="Line number of a torn attempts ledger line."
    )
    notes: list[str] = Field(default_factory=list, description="Anything else worth knowing.")


@dataclass(frozen=True)
class _Read:
    """What automl-setup reads of an experiment itself, before the engine answers."""

    asked: Asked
    entries: list[AttemptEntry]
    torn_line: int | None


def _read(files: ExperimentFiles) -> _Read:
    require_experiment(
        files, "status", remedy="list experiments with", exit_code=ExitCode.NOTHING_INSTALLED
    )
    binding = read_binding(files)
    entries, torn_line = read_attempts(files)
    accepted = [e.environment for e in entries if e.outcome == "accepted" and e.environment]
    return _Read(Asked(files, binding, accepted[-1] if accepted else None), entries, torn_line)


def experiment_status(query: StatusQuery) -> ExperimentStatus:
    read = _read(ExperimentFiles(query.workspace.path, query.experiment_id))
    (answer,) = engine_answers([read.asked], query.workspace.path, None)
    return _status(read, answer)


def _status(read: _Read, known: Known) -> ExperimentStatus:
    files, binding, environment = read.asked.files, read.asked.binding, read.asked.environment
    entries, torn_line = read.entries, read.torn_line
    data, problem = known.data, known.problem
    # After the engine's answer: a "running" it gives for an engine that died since is caught.
    running = not known.lock_free if known.lock_free is not None else lock_is_held(files)
    notes = [problem] if problem else []
    moved = relocation(binding, files)
    if moved:
        notes.append(moved)
    if torn_line:
        notes.append(f"attempts ledger line {torn_line} is torn (interrupted write)")
    state = str(data["state"]) if data else ("running" if running else "unknown")
    if state not in STATES:
        notes.append(f"the engine reports state {state!r}, which automl-setup does not know")
        state = "unknown"
    resume = resume_command(
        files, binding.manifest_path, environment or binding.engine.environment_path
    )
    if state == "running" and not running:
        # The engine holds the controller lock for its whole life, so a free lock proves it
        # is gone, whatever its own files (a killed controller's pid, since reused) say.
        state = "interrupted"
        notes.append(
            "the engine reports running, but no engine process holds the controller lock (it "
            f"was killed); continue it with `{resume}`"
        )
    found = known.trials
    trials: list[Trial] = found.trials if found else []
    if found and found.torn_line and not running:
        notes.append(f"engine ledger line {found.torn_line} is torn (an interrupted write)")
    if known.trials_problem:  # the rest of the status still stands
        notes.append(known.trials_problem)
    return ExperimentStatus(
        experiment_id=files.experiment_id,
        workspace=str(files.workspace),
        state=state,
        controller_running=running,
        trials_done=data.get("trials_done") if data else None,
        planned_trials=data.get("planned_trials") if data else None,
        best=data.get("best") if data else None,
        trials=trials,
        resume_command=resume if state == "interrupted" else None,
        bound_commit=bound_commit(binding),
        bound_ref=binding.engine.source.requested_ref if binding.engine.source else None,
        bound_environment=binding.engine.environment_path,
        identity_digest=binding.engine.identity_digest,
        last_attempt=entries[-1] if entries else None,
        attempts_torn_line=torn_line,
        notes=notes,
    )


class ExperimentListing(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workspace: str = Field(description="The (first) workspace listed.")
    workspaces: list[str] = Field(description="Every workspace listed, in the order asked.")
    experiments: list[ExperimentStatus] = Field(description="The status of each experiment.")
    unreadable: list[str] = Field(
        default_factory=list,
        description="Experiments whose files could not be read, and why (with a filter: whose "
        "binding cannot say whether it matches).",
    )
    filters: dict[str, str] = Field(
        default_factory=dict,
        description="The filters asked (bound_commit, identity_digest, closure_member), as "
        "checked; empty without one.",
    )
    total: int = Field(
        description="Experiments in the workspaces (that match the filters, when given), on "
        "every page."
    )
    next_cursor: str | None = Field(
        None,
        description="More follow: pass it as the cursor of the next call for the next page "
        "(null on the last page).",
    )


def list_experiments(query: ListQuery) -> ExperimentListing:
    """Every experiment of the workspaces (or one page of one workspace's, in id order), only
    those bound to the build the filters name when they are given; one damaged experiment
    does not hide the others, and one whose binding cannot say is listed as unreadable."""
    listings = [_list_one(query, where.path) for where in (query.workspace, *query.workspaces)]
    return ExperimentListing(
        workspace=listings[0].workspace,
        workspaces=[listing.workspace for listing in listings],
        experiments=[s for listing in listings for s in listing.experiments],
        unreadable=[u for listing in listings for u in listing.unreadable],
        filters={
            name: str(value)
            for name in ("bound_commit", "identity_digest", "closure_member")
            if (value := getattr(query, name)) is not None
        },
        total=sum(listing.total for listing in listings),
        next_cursor=listings[0].next_cursor,
    )


def _list_one(query: ListQuery, where: Path) -> ExperimentListing:
    if where.exists() and not where.is_dir():
        raise InvalidInput("list", f"{where} is not a directory", "pass the workspace")
    after = cursor_position(where, query.cursor) if query.cursor else None
    names, undecided = experiment_names(where / SIDECAR), list[str]()
    if query.filtered:
        names, undecided = bound_to(query, where, names)
    on_page, last = page(names, after, query.page_size)
    reads: list[_Read | str] = [] if after else list(undecided)
    for name in on_page:
        try:
            reads.append(_read(ExperimentFiles(where, ExperimentId(name))))
        except SetupError as exc:
            reads.append(f"{name}: {exc.message}")
    asked = [read.asked for read in reads if isinstance(read, _Read)]
    answers = iter(engine_answers(asked, where, set(names)))
    found, unreadable = [], []
    for read in reads:
        if isinstance(read, str):
            unreadable.append(read)
            continue
        try:
            found.append(_status(read, next(answers)))
        except SetupError as exc:
            unreadable.append(f"{read.asked.files.experiment_id}: {exc.message}")
    return ExperimentListing(
        workspace=str(where),
        workspaces=[str(where)],
        experiments=found,
        unreadable=unreadable,
        total=len(names),
        next_cursor=make_cursor(where, last) if last is not None else None,
    )
