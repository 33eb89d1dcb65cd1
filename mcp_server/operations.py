"""The operations: one function per thing a person or an agent can ask, each taking its request
model (`mcp_server.requests`) and returning a result model. Both faces call exactly these (the
CLI command and the MCP tool of its row in `faces/registry.py`), so what an operation means is
decided here once: the install guard (transition rule 2) is wired in, `verify` adds the
diagnosis when nothing is installed and compares with an experiment's binding when asked.
Operations of other areas live in their area (`experiments/stop.py`, `slurm/submit.py`, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

# Only what the result models below are made of: a command imports the area it runs when it
# runs it (the functions below, and the registry's rows), so `launch` never imports slurm, the
# report or the installer (bench/README.md: ~130 ms of every command's start).
from mcp_server.environment.diagnose import Diagnosis
from mcp_server.environment.records import FieldDiff, HistoryEntry
from mcp_server.environment.verify import VerifyReport
from mcp_server.errors import ExitCode
from mcp_server.requests import (
    BranchesQuery,
    DiagnoseQuery,
    HistoryQuery,
    InstallRequest,
    LaunchRequest,
    ListQuery,
    ProvenanceQuery,
    RepairRequest,
    ResolveRequest,
    ResumeRequest,
    StatusQuery,
)
from mcp_server.source.profile import ProfileSource

if TYPE_CHECKING:
    from mcp_server.environment.install import InstallResult
    from mcp_server.environment.transaction import Progress
    from mcp_server.experiments.started import StartedEngine
    from mcp_server.experiments.status import ExperimentListing, ExperimentStatus
    from mcp_server.source.branches import BranchListing


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BranchResolution(_Result):
    repository: str = Field(description="Repository URL, credentials stripped.")
    branch: str = Field(description="The branch asked for.")
    ref: str = Field(description="The ref that was resolved: refs/heads/<branch>.")
    commit: str = Field(description="Full commit id the branch points at now.")
    profile_source: ProfileSource = Field(description="Which engine profile, and from where.")


class BindingCheck(_Result):
    experiment_id: str = Field(description="The experiment compared with.")
    binding_path: str = Field(description="Its binding.json.")
    bound_commit: str | None = Field(
        description="The commit it is bound to; null: a reviewed wheel."
    )
    bound_identity_digest: str = Field(description="The identity digest it is bound to.")
    matches: bool = Field(description="True when the environment holds exactly the bound build.")
    differences: list[FieldDiff] = Field(
        description="Every identity field where the installed engine differs from the bound one."
    )
    recreate_commands: list[str] = Field(
        description="Commands that rebuild the bound engine in a separate environment and "
        "resume there (empty when it matches)."
    )


class ProvenanceReport(VerifyReport):
    """`verify`: the environment's report, plus what the question asked for."""

    verified: bool = Field(
        description="The engine matches its record and, if an experiment was given, its binding."
    )
    experiment: BindingCheck | None = Field(
        None, description="The comparison with the experiment's binding, when one was asked."
    )
    diagnosis: Diagnosis | None = Field(
        None, description="What is (not) installed and how to install it, when nothing is."
    )
    profile_source: ProfileSource = Field(description="Which engine profile, and from where.")

    @property
    def exit_code(self) -> ExitCode:
        if self.experiment is not None and not self.experiment.matches:
            return ExitCode.REFUSED
        return super().exit_code


class RepairResult(_Result):
    environment: str = Field(description="sys.prefix of the environment.")
    done: str = Field(description="What repair did, or that there was nothing to repair.")


class InstallHistory(_Result):
    environment: str = Field(description="sys.prefix of the environment.")
    entries: list[HistoryEntry] = Field(description="Installs and rollbacks, oldest first.")
    torn_line: int | None = Field(description="Line number of a torn (interrupted) write.")


# --------------------------------------------------------------------------------------------
# The operations


def resolve(request: ResolveRequest, progress: Progress | None = None) -> BranchResolution:
    from mcp_server.children.bound import Watch
    from mcp_server.source import gitsource

    watch = Watch.of(request.stall_timeout, progress)
    res = gitsource.resolve_branch(request.profile.repository, request.branch, watch)
    return BranchResolution(
        repository=res.repository,
        branch=res.branch,
        ref=res.ref,
        commit=res.commit,
        profile_source=request.profile.source(),
    )


def branches(query: BranchesQuery, progress: Progress | None = None) -> BranchListing:
    from mcp_server.children.bound import Watch
    from mcp_server.source import branches as listing

    watch = Watch.of(query.stall_timeout, progress)
    return listing.list_branches(query.profile, query.with_subdirectory, watch)


def install(request: InstallRequest, progress: Progress | None = None) -> InstallResult:
    from mcp_server.environment import install as installing

    return installing.install_engine(request, _bound, progress or installing.no_progress)


def _bound(state_dir: Path) -> list[str]:
    """The install guard's question, asked only where an engine is installed already: an
    install into a new environment imports no experiments module."""
    from mcp_server.experiments.registered import bound_experiments

    return bound_experiments(state_dir)


def verify(query: ProvenanceQuery) -> ProvenanceReport:
    from mcp_server.environment import diagnose as diagnosis
    from mcp_server.environment import install as installing

    report = installing.verify(query.python, query.profile, deep=query.deep)
    found = None
    if report.exit_code == ExitCode.NOTHING_INSTALLED:
        found = diagnosis.diagnose(query.python, query.profile)
    check, notes = None, list(report.notes)
    if query.experiment_id is not None and query.workspace is not None:
        check, older = _binding_check(query)
        notes += [n for n in older if n not in notes]  # said once, record and binding alike
    verified = report.status == "verified" and (check is None or check.matches)
    fields: dict[str, Any] = {**report.model_dump(), "notes": notes}
    return ProvenanceReport(
        **fields,
        verified=verified,
        experiment=check,
        diagnosis=found,
        profile_source=query.profile.source(),
    )


def _binding_check(query: ProvenanceQuery) -> tuple[BindingCheck, list[str]]:
    """The comparison with the experiment's binding, and what it cannot say (an older
    binding records no closure)."""
    from mcp_server.environment.records import RecordStore
    from mcp_server.environment.target import locate
    from mcp_server.experiments.binding import (
        binding_differences,
        binding_notes,
        bound_commit,
        read_binding,
        recreate_commands,
    )
    from mcp_server.experiments.files import ExperimentFiles

    assert query.experiment_id is not None and query.workspace is not None
    files = ExperimentFiles(query.workspace.path, query.experiment_id)
    binding = read_binding(files)
    env = locate(query.python)
    found = binding_differences(binding, env, RecordStore(env.state_dir).read_record())
    check = BindingCheck(
        experiment_id=binding.experiment_id,
        binding_path=str(files.binding),
        bound_commit=bound_commit(binding),
        bound_identity_digest=binding.engine.identity_digest,
        matches=not found,
        differences=found,
        recreate_commands=recreate_commands(binding, Path(binding.manifest_path), files.workspace)
        if found
        else [],
    )
    return check, binding_notes(binding)


def diagnose(query: DiagnoseQuery) -> Diagnosis:
    from mcp_server.environment import diagnose as diagnosis

    return diagnosis.diagnose(query.python, query.profile)


def repair(request: RepairRequest, progress: Progress | None = None) -> RepairResult:
    from mcp_server.children.bound import Watch
    from mcp_server.environment import install as installing

    watch = Watch.of(request.stall_timeout, progress)
    environment, done = installing.repair_environment(request.python, watch)
    return RepairResult(environment=environment, done=done)


def history(query: HistoryQuery) -> InstallHistory:
    from mcp_server.environment import install as installing

    entries, torn, where = installing.history(query.python)
    return InstallHistory(environment=where, entries=entries, torn_line=torn)


def launch(request: LaunchRequest, progress: Progress | None = None) -> StartedEngine:
    from mcp_server.experiments import launch as launching

    return launching.launch_experiment(request, progress)


def resume(request: ResumeRequest, progress: Progress | None = None) -> StartedEngine:
    from mcp_server.experiments import resume as resuming

    return resuming.resume_experiment(request, progress)


def status(query: StatusQuery) -> ExperimentStatus:
    from mcp_server.experiments import status as statuses

    return statuses.experiment_status(query)


def list_experiments(query: ListQuery) -> ExperimentListing:
    from mcp_server.experiments import status as statuses

    return statuses.list_experiments(query)
