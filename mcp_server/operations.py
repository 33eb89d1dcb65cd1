"""The operations: one function per thing a person or an agent can ask, each taking its request
model (`mcp_server.requests`) and returning a result model. Both faces call exactly these (the
CLI command and the MCP tool listed in `OPERATIONS`), so what an operation means is decided here
once: the install guard (rule 5) is wired in, `verify` adds the diagnosis when nothing is
installed and compares with an experiment's binding when asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.environment import diagnose as diagnosis
from mcp_server.environment import install as installing
from mcp_server.environment.diagnose import Diagnosis
from mcp_server.environment.install import InstallResult, Progress, no_progress
from mcp_server.environment.records import FieldDiff, HistoryEntry, RecordStore
from mcp_server.environment.target import locate
from mcp_server.environment.verify import VerifyReport
from mcp_server.errors import ExitCode
from mcp_server.experiments import launch as launching
from mcp_server.experiments import resume as resuming
from mcp_server.experiments import status as statuses
from mcp_server.experiments.binding import binding_differences, read_binding, recreate_commands
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.registry import bound_experiments
from mcp_server.experiments.started import StartedEngine
from mcp_server.experiments.status import ExperimentListing, ExperimentStatus
from mcp_server.requests import (
    DiagnoseQuery,
    HistoryQuery,
    InstallRequest,
    LaunchRequest,
    ListQuery,
    ProvenanceQuery,
    RepairRequest,
    Request,
    ResolveRequest,
    ResumeRequest,
    StatusQuery,
)
from mcp_server.source import gitsource


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BranchResolution(_Result):
    repository: str = Field(description="Repository URL, credentials stripped.")
    branch: str
    ref: str = Field(description="The ref that was resolved: refs/heads/<branch>.")
    commit: str = Field(description="Full commit id the branch points at now.")


class BindingCheck(_Result):
    experiment_id: str
    binding_path: str
    bound_commit: str
    bound_identity_digest: str
    matches: bool = Field(description="True when the environment holds exactly the bound build.")
    differences: list[FieldDiff]
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

    @property
    def exit_code(self) -> ExitCode:
        if self.experiment is not None and not self.experiment.matches:
            return ExitCode.REFUSED
        return super().exit_code


class RepairResult(_Result):
    environment: str
    done: str = Field(description="What repair did, or that there was nothing to repair.")


class InstallHistory(_Result):
    environment: str
    entries: list[HistoryEntry]
    torn_line: int | None = Field(description="Line number of a torn (interrupted) write.")


# --------------------------------------------------------------------------------------------
# The operations


def resolve(request: ResolveRequest) -> BranchResolution:
    res = gitsource.resolve_branch(request.profile.repository, request.branch)
    return BranchResolution(
        repository=res.repository, branch=res.branch, ref=res.ref, commit=res.commit
    )


def install(request: InstallRequest, progress: Progress = no_progress) -> InstallResult:
    return installing.install_engine(request, bound_experiments, progress)


def verify(query: ProvenanceQuery) -> ProvenanceReport:
    report = installing.verify(query.python, query.profile)
    found = None
    if report.exit_code == ExitCode.NOTHING_INSTALLED:
        found = diagnosis.diagnose(query.python, query.profile)
    check = None
    if query.experiment_id is not None and query.workspace is not None:
        check = _binding_check(query)
    verified = report.status == "verified" and (check is None or check.matches)
    fields: dict[str, Any] = report.model_dump()
    return ProvenanceReport(**fields, verified=verified, experiment=check, diagnosis=found)


def _binding_check(query: ProvenanceQuery) -> BindingCheck:
    assert query.experiment_id is not None and query.workspace is not None
    files = ExperimentFiles(query.workspace.path, query.experiment_id)
    binding = read_binding(files)
    env = locate(query.python)
    found = binding_differences(binding, env, RecordStore(env.state_dir).read_record())
    return BindingCheck(
        experiment_id=binding.experiment_id,
        binding_path=str(files.binding),
        bound_commit=binding.engine.source.commit,
        bound_identity_digest=binding.engine.identity_digest,
        matches=not found,
        differences=found,
        recreate_commands=recreate_commands(binding, Path(binding.manifest_path), files.workspace)
        if found
        else [],
    )


def diagnose(query: DiagnoseQuery) -> Diagnosis:
    return diagnosis.diagnose(query.python, query.profile)


def repair(request: RepairRequest) -> RepairResult:
    environment, done = installing.repair_environment(request.python)
    return RepairResult(environment=environment, done=done)


def history(query: HistoryQuery) -> InstallHistory:
    entries, torn, where = installing.history(query.python)
    return InstallHistory(environment=where, entries=entries, torn_line=torn)


def launch(request: LaunchRequest) -> StartedEngine:
    return launching.launch_experiment(request)


def resume(request: ResumeRequest) -> StartedEngine:
    return resuming.resume_experiment(request)


def status(query: StatusQuery) -> ExperimentStatus:
    return statuses.experiment_status(query)


def list_experiments(query: ListQuery) -> ExperimentListing:
    return statuses.list_experiments(query)


# --------------------------------------------------------------------------------------------
# The table both faces are checked against


@dataclass(frozen=True)
class Operation:
    """One operation: its function and request, the CLI command and the MCP tool that call it
    (the tool's name is the command's name plus what it acts on), and where a face's fields
    differ from the request's, why."""

    run: Callable[..., BaseModel]
    request: type[Request]
    command: str
    tool: str
    cli_only: frozenset[str] = frozenset()
    mcp_only: frozenset[str] = frozenset()
    why: str = ""


OPERATIONS: tuple[Operation, ...] = (
    Operation(resolve, ResolveRequest, "resolve", "resolve_branch"),
    Operation(
        install,
        InstallRequest,
        "install",
        "install_engine",
        why="with neither branch nor commit, the command line installs main (its documented "
        "default) while the MCP tool asks the user: an agent never picks a branch",
    ),
    Operation(verify, ProvenanceQuery, "verify", "verify_engine"),
    Operation(diagnose, DiagnoseQuery, "diagnose", "diagnose_engine"),
    Operation(repair, RepairRequest, "repair", "repair_engine"),
    Operation(history, HistoryQuery, "history", "history_engine"),
    Operation(
        launch,
        LaunchRequest,
        "launch",
        "launch_experiment",
        cli_only=frozenset({"detach"}),
        why="an MCP call always returns at once (detached); the command line can wait",
    ),
    Operation(
        resume,
        ResumeRequest,
        "resume",
        "resume_experiment",
        cli_only=frozenset({"detach"}),
        why="an MCP call always returns at once (detached); the command line can wait",
    ),
    Operation(status, StatusQuery, "status", "status_experiment"),
    Operation(list_experiments, ListQuery, "list", "list_experiments"),
)
