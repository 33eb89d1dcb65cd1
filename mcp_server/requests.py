"""Request models: what each operation takes. Both faces build them (argparse and the MCP
tools), the core takes them, and a test checks that every operation's CLI command and MCP tool
carry exactly these fields.

Fields are value types (`mcp_server.values`): a request that exists holds only checked values.
`python=None` means "the active virtual environment" ($VIRTUAL_ENV), resolved by the core.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_server.children.bound import MAX_STALL_S, MIN_STALL_S
from mcp_server.errors import Arg, InvalidInput
from mcp_server.selectors import ClosureMemberSpec, HexPrefix, TrackingUri
from mcp_server.source.profile import EngineProfile
from mcp_server.values import (
    BranchName,
    CommitId,
    ExperimentId,
    ExtraName,
    ManifestPath,
    PageCursor,
    ReportPath,
    TargetPath,
    WheelPath,
    WheelSha256,
    WorkspacePath,
)

# What a person at the command line gets when they name neither a branch nor a commit (the
# documented default). An agent is never given a default: the MCP face asks the user.
DEFAULT_BRANCH = "main"
# The longest `stop` waits after SIGTERM before it reports (or SIGKILLs, with kill).
MAX_GRACE_S = 3600.0
MAX_PAGE_SIZE = 1000


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class NetworkRequest(Request):
    """A request whose operation reaches a repository or an index (git, and uv's fetches)."""

    stall_timeout: float | None = Field(
        None,
        description=f"Seconds a git or uv fetch may go without any progress before it is given "
        f"up on ({MIN_STALL_S:g} to {MAX_STALL_S:g}; default: the project file's stall-timeout, "
        "else 30). A slow but moving transfer is never cut off.",
        json_schema_extra={"ge": MIN_STALL_S, "le": MAX_STALL_S},
    )

    @model_validator(mode="after")
    def _stall_bounded(self) -> NetworkRequest:
        if self.stall_timeout is not None and not MIN_STALL_S <= self.stall_timeout <= MAX_STALL_S:
            raise InvalidInput(
                "validate",
                f"stall timeout {self.stall_timeout:g} s is out of range",
                f"pass {MIN_STALL_S:g} to {MAX_STALL_S:g} seconds",
            )
        return self


class ResolveRequest(NetworkRequest):
    profile: EngineProfile
    branch: BranchName


class InstallRequest(NetworkRequest):
    profile: EngineProfile
    python: TargetPath | None
    branch: BranchName | None = None
    commit: CommitId | None = None
    expect_commit: CommitId | None = Field(
        None,
        description="The commit the user confirmed for `branch`: refused, changing nothing, "
        "when the branch no longer points at it.",
    )
    create_env: bool = Field(False, description="Create the virtual environment if it is missing.")
    extras: tuple[ExtraName, ...] = Field((), max_length=16, description="Engine extras.")
    wheel: WheelPath | None = Field(None, description="A reviewed wheel to install exactly.")
    sha256: WheelSha256 | None = Field(None, description="The reviewed wheel's sha256.")
    require_pinned: bool = Field(
        False,
        description="Refuse an engine whose dependency closure resolves a moving reference (a "
        "VCS or URL requirement naming no commit), changing nothing.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> InstallRequest:
        given = [self.branch is not None, self.commit is not None, self.wheel is not None]
        if sum(given) > 1:
            raise InvalidInput(
                "validate",
                "more than one of a branch, a commit and a wheel were given",
                ["give exactly one of ", Arg("branch"), ", ", Arg("commit"), " or ", Arg("wheel")],
            )
        if (self.wheel is None) != (self.sha256 is None):
            raise InvalidInput(
                "validate",
                "a reviewed wheel and its sha256 go together",
                [
                    "give ",
                    Arg("wheel", "FILE"),
                    " with ",
                    Arg("sha256", "HEX"),
                    " (recorded at the review)",
                ],
            )
        if not any(given):
            raise InvalidInput(
                "validate",
                "no branch or commit given",
                [
                    "ask the user: main, or which development branch? then give ",
                    Arg("branch", "NAME"),
                ],
            )
        if self.expect_commit is not None and self.branch is None:
            raise InvalidInput(
                "validate",
                "an expected commit confirms a branch, and no branch was given",
                [
                    "give ",
                    Arg("branch", "NAME"),
                    " with ",
                    Arg("expect_commit", "COMMIT"),
                    " (the commit resolve showed)",
                ],
            )
        return self


class BranchesQuery(NetworkRequest):
    profile: EngineProfile
    with_subdirectory: bool = Field(
        False, description="List only branches whose head holds the profile's subdirectory."
    )


class ProvenanceQuery(Request):
    """verify: the engine in `python` against its record, and optionally against the binding of
    one experiment (`experiment_id` and `workspace` go together)."""

    profile: EngineProfile
    python: TargetPath | None
    experiment_id: ExperimentId | None = None
    workspace: WorkspacePath | None = None
    deep: bool = Field(
        False,
        description="Also hash every file of every distribution of the engine's dependency "
        "closure against its RECORD (reading them all: slower), naming each edited file.",
    )

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


class RepairRequest(NetworkRequest):
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
    workspaces: tuple[WorkspacePath, ...] = Field(
        (),
        description="Further workspaces (the command line's --workspace given again), listed "
        "after the first with the same filters; not with a page size or cursor.",
    )
    bound_commit: HexPrefix | None = Field(
        None,
        description="Only the experiments bound to an engine commit that starts with these hex "
        "digits (4 to 40).",
    )
    identity_digest: HexPrefix | None = Field(
        None,
        description="Only the experiments whose bound identity digest starts with these hex "
        "digits.",
    )
    closure_member: ClosureMemberSpec | None = Field(
        None,
        description="Only the experiments whose bound closure holds this distribution: NAME, "
        "or NAME==VERSION.",
    )
    cursor: PageCursor | None = None
    page_size: int | None = Field(
        None,
        description=f"At most this many experiments per page (1 to {MAX_PAGE_SIZE}); every one "
        "when unset.",
        json_schema_extra={"ge": 1, "le": MAX_PAGE_SIZE},
    )

    @model_validator(mode="after")
    def _page_bounded(self) -> ListQuery:
        if self.page_size is not None and not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise InvalidInput(
                "validate",
                f"page size {self.page_size} is out of range",
                f"pass 1 to {MAX_PAGE_SIZE}, or none for every experiment",
            )
        if self.workspaces and (self.page_size is not None or self.cursor is not None):
            raise InvalidInput(
                "validate",
                "pages are of one workspace: a page size or cursor with more than one workspace",
                "list the workspaces whole (no --page-size), or page through one at a time",
            )
        return self

    @property
    def filtered(self) -> bool:
        return any((self.bound_commit, self.identity_digest, self.closure_member))


class StopRequest(Request):
    experiment_id: ExperimentId
    workspace: WorkspacePath
    kill: bool = Field(
        False, description="SIGKILL the engine's process group if it still runs after the grace."
    )
    grace: float = Field(
        30.0,
        description=f"Seconds to wait after SIGTERM (0 to {MAX_GRACE_S:g}).",
        json_schema_extra={"ge": 0, "le": MAX_GRACE_S},
    )

    @model_validator(mode="after")
    def _grace_bounded(self) -> StopRequest:
        if not 0 <= self.grace <= MAX_GRACE_S:
            raise InvalidInput(
                "validate",
                f"grace {self.grace:g} s is out of range",
                f"pass 0 to {MAX_GRACE_S:g} seconds",
            )
        return self


class LogsQuery(Request):
    """The tail of an attempt's log (the last attempt when neither is named) or of a trial's."""

    experiment_id: ExperimentId
    workspace: WorkspacePath
    attempt: int | None = Field(
        None,
        description="Attempt number of the attempts ledger (default: the last attempt).",
        json_schema_extra={"ge": 1},
    )
    trial: int | None = Field(
        None, description="Trial index of the engine (from 0).", json_schema_extra={"ge": 0}
    )
    follow: bool = Field(False, description="Keep printing the log as it grows (command line).")

    @model_validator(mode="after")
    def _one_log(self) -> LogsQuery:
        if self.attempt is not None and self.trial is not None:
            raise InvalidInput(
                "logs",
                "both an attempt and a trial were given",
                ["give ", Arg("attempt"), " or ", Arg("trial"), ", not both"],
            )
        if (self.attempt is not None and self.attempt < 1) or (
            self.trial is not None and self.trial < 0
        ):
            raise InvalidInput(
                "logs", "attempts count from 1, trials from 0", "pass a number of the ledger"
            )
        if self.follow and self.trial is not None:
            raise InvalidInput(
                "logs",
                "only an attempt's log can be followed, not a trial's",
                ["drop ", Arg("trial"), ", or ", Arg("follow")],
            )
        return self


class ReportQuery(Request):
    """The self-contained HTML report of one experiment (and its content, structured)."""

    experiment_id: ExperimentId
    workspace: WorkspacePath
    out: ReportPath | None = Field(
        None,
        description="Where to write it: a new .html file (default: a content-addressed file "
        "beside the experiment's binding).",
    )


MAX_TRACK_INTERVAL_S = 3600.0


class TrackRequest(NetworkRequest):
    """One experiment written to an MLflow tracking server: a parent run, a nested run per
    trial, the engine build as tags, the report, binding and lock as artifacts."""

    experiment_id: ExperimentId
    workspace: WorkspacePath
    tracking_uri: TrackingUri | None = Field(
        None,
        description="The MLflow tracking server, http(s)://HOST[:PORT][/PATH] (default: "
        "MLFLOW_TRACKING_URI); credentials go in MLflow's own variables, never in it.",
    )
    follow: bool = Field(
        False, description="Keep syncing until the experiment is finished (or stops running)."
    )
    interval: float = Field(
        10.0,
        description=f"Seconds between syncs with follow (1 to {MAX_TRACK_INTERVAL_S:g}).",
        json_schema_extra={"ge": 1, "le": MAX_TRACK_INTERVAL_S},
    )

    @model_validator(mode="after")
    def _interval_bounded(self) -> TrackRequest:
        if not 1 <= self.interval <= MAX_TRACK_INTERVAL_S:
            raise InvalidInput(
                "validate",
                f"interval {self.interval:g} s is out of range",
                f"pass 1 to {MAX_TRACK_INTERVAL_S:g} seconds",
            )
        return self
