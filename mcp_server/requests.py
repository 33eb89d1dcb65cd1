"""Request models: what each operation takes. Both faces build them (argparse and the MCP
tools), the core takes them, and a test checks that every operation's CLI command and MCP tool
carry exactly these fields.

Fields are value types (`mcp_server.values`): a request that exists holds only checked values.
`python=None` means "the active virtual environment" ($VIRTUAL_ENV), resolved by the core.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_server.errors import InvalidInput
from mcp_server.source.profile import EngineProfile
from mcp_server.values import (
    BranchName,
    CommitId,
    ExperimentId,
    ExtraName,
    ManifestPath,
    TargetPath,
    WorkspacePath,
)

# What a person at the command line gets when they name neither a branch nor a commit (the
# documented default). An agent is never given a default: the MCP face asks the user.
DEFAULT_BRANCH = "main"


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class ResolveRequest(Request):
    profile: EngineProfile
    branch: BranchName


class InstallRequest(Request):
    profile: EngineProfile
    python: TargetPath | None
    branch: BranchName | None = None
    commit: CommitId | None = None
    create_env: bool = False
    extras: tuple[ExtraName, ...] = ()

    @model_validator(mode="after")
    def _one_source(self) -> InstallRequest:
        if self.branch is not None and self.commit is not None:
            raise InvalidInput(
                "validate",
                "both a branch and a commit were given",
                "pass either --branch or --commit",
            )
        if self.branch is None and self.commit is None:
            raise InvalidInput(
                "validate",
                "no branch or commit given",
                "ask the user: main, or which development branch? then pass --branch NAME",
            )
        return self


class ProvenanceQuery(Request):
    """verify: the engine in `python` against its record, and optionally against the binding of
    one experiment (`experiment_id` and `workspace` go together)."""

    profile: EngineProfile
    python: TargetPath | None
    experiment_id: ExperimentId | None = None
    workspace: WorkspacePath | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> ProvenanceQuery:
        if (self.experiment_id is None) != (self.workspace is None):
            raise InvalidInput(
                "verify",
                "an experiment id and a workspace go together",
                "pass both to compare with an experiment's binding, or neither",
            )
        return self


class DiagnoseQuery(Request):
    profile: EngineProfile
    python: TargetPath | None


class RepairRequest(Request):
    python: TargetPath | None


class HistoryQuery(Request):
    python: TargetPath | None


class LaunchRequest(Request):
    manifest: ManifestPath
    workspace: WorkspacePath
    python: TargetPath | None
    detach: bool = Field(False, description="Return at once with the engine's pid and log.")


class ResumeRequest(Request):
    experiment_id: ExperimentId
    workspace: WorkspacePath
    manifest: ManifestPath
    python: TargetPath | None
    detach: bool = Field(False, description="Return at once with the engine's pid and log.")


class StatusQuery(Request):
    experiment_id: ExperimentId
    workspace: WorkspacePath


class ListQuery(Request):
    workspace: WorkspacePath
