"""The MCP tools' inputs: argument types bounded for the schema the agent sees, the engine
profile argument, and the branch question asked through elicitation when neither a branch nor
a commit was given. Their content is checked by the value types of each request
(mcp_server/values.py), whose message is the one the agent gets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, Elicit, ElicitationResult
from mcp.types import ListRootsResult
from pydantic import BaseModel, ConfigDict, Field

from mcp_server.faces.mcp.remedies import refusal
from mcp_server.faces.mcp.roots import check_roots, first_root
from mcp_server.source.config import effective_profile
from mcp_server.source.profile import EngineProfile
from mcp_server.values import (
    MAX_BRANCH_LENGTH,
    MAX_ID_LENGTH,
    MAX_PATH_LENGTH,
    MAX_SUBDIRECTORY_LENGTH,
    MAX_URL_LENGTH,
)


def _path(description: str, default: Any = ...) -> Any:
    return Field(
        default,
        min_length=1,
        max_length=MAX_PATH_LENGTH,
        description=f"{description} (absolute path).",
    )


Python = Annotated[str, _path("Target Python interpreter or virtual-environment directory")]
Workspace = Annotated[str, _path("Directory that holds the experiments")]
Manifest = Annotated[str, _path("Experiment manifest, YAML or JSON")]
ReportOut = Annotated[str, _path("A new .html file for the report")]
LockOut = Annotated[str, _path("A new pylock.toml (or pylock.<name>.toml) for the lock")]
Wheel = Annotated[str, _path("A reviewed wheel file (.whl) to install exactly")]
Sha256 = Annotated[
    str, Field(min_length=64, max_length=64, description="The reviewed wheel's sha256 (hex).")
]
Branch = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_BRANCH_LENGTH,
        description="Branch name exactly as the repository has it: 'main' or a development "
        "branch such as 'dev/feature'. Never guess it: ask the user.",
    ),
]
Commit = Annotated[str, Field(min_length=1, max_length=64, description="Full commit id.")]
ExperimentId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="Exact experiment id (search.experiment_id of its manifest).",
    ),
]
Extra = Annotated[str, Field(min_length=1, max_length=64)]


class ProfileArgs(BaseModel):
    """Which engine: these fields win over `file`, which wins over AUTOML_SETUP_PROFILE, the
    project file, then the default (the command line's precedence: flags over --profile FILE)."""

    model_config = ConfigDict(extra="forbid")

    repository: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_URL_LENGTH,
        description="git URL: https://, ssh://, git@host:path or file:///path.",
    )
    subdirectory: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_SUBDIRECTORY_LENGTH,
        description="Path of the engine package inside the repository.",
    )
    distribution: str | None = Field(
        None, min_length=1, max_length=200, description="Distribution name the wheel must have."
    )
    requirement: str | None = Field(
        None, min_length=1, max_length=200, description="Version specifier, e.g. '==0.1.0'."
    )
    file: str | None = _path("TOML engine profile file", None)


ProfileOption = Annotated[
    ProfileArgs | None,
    Field(
        description="Engine profile; these fields win over `file`, which wins over "
        "$AUTOML_SETUP_PROFILE, then the project file (automl-setup.toml or [tool.automl-setup] "
        "in pyproject.toml, found from the client's first root upward), then the default "
        "(NVIDIA-TAO/tao-automl, packages/automl-core, nvidia-automl-core ==0.1.0). Omit it "
        "to use the project's engine; the reply's profile_source says which was used."
    ),
]


def engine_profile(args: ProfileArgs | None, roots: ListRootsResult | None) -> EngineProfile:
    """The profile of the arguments, over AUTOML_SETUP_PROFILE or the project file found from
    the client's first local root (the user's project), else from the server's working
    directory: the same discovery as the command line's (source/config.py)."""
    args = args or ProfileArgs()
    profile = effective_profile(
        project_start(roots),
        Path(args.file) if args.file else None,
        repository=args.repository,
        subdirectory=args.subdirectory,
        distribution=args.distribution,
        requirement=args.requirement,
    )
    # Wherever the profile came from (argument, profile file, project file, environment),
    # a local repository is a path the client's roots must allow.
    check_roots(roots, repository=str(profile.repository))
    return profile


def project_start(roots: ListRootsResult | None) -> Path:
    """Where the project file is looked for: the client's first root, else the server's
    working directory (where a client started it: no path argument is ever taken from it)."""
    return first_root(roots) or Path.cwd()


# --------------------------------------------------------------------------------------------
# The branch question


class BranchChoice(BaseModel):
    """The form the user fills in."""

    branch: str = Field(
        min_length=1,
        max_length=MAX_BRANCH_LENGTH,
        title="Branch",
        description="'main', or the exact name of a development branch",
    )


BRANCH_QUESTION = "Install the engine from main, or from which development branch?"


def _can_ask_user(ctx: Context) -> bool:
    """The SDK's own rule: a bare `elicitation: {}` means form support; url-only does not."""
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def ask_branch(
    branch: str | None, commit: str | None, ctx: Context, wheel: str | None = None
) -> str | Elicit[BranchChoice] | None:
    """Resolver: the branch as given; with neither branch nor commit (nor a reviewed wheel),
    ask the user. Without this capability check the SDK would answer with a protocol error the
    agent cannot act on."""
    if branch is not None or commit is not None or wheel is not None:
        return branch
    if not _can_ask_user(ctx):
        raise refusal(
            "choose branch",
            "no branch or commit given, and this client cannot put the question to the user",
            'ask the user "main, or which development branch?" and call install_engine again '
            "with branch=<their answer>; never choose a branch yourself",
        )
    return Elicit(BRANCH_QUESTION, BranchChoice)


def chosen_branch(answer: ElicitationResult[BranchChoice]) -> str | None:
    if answer.action == "decline":
        raise refusal(
            "choose branch",
            "the user declined to choose a branch; nothing was installed",
            "ask the user which branch to install (main or a development branch) and call "
            "install_engine again with branch=<name>; never choose one yourself",
        )
    if answer.action == "cancel":
        raise refusal(
            "choose branch",
            "the user cancelled the branch question; nothing was installed",
            "do not install until the user says which branch",
        )
    # A resolver's plain return (the branch argument, or None with a commit) arrives as an
    # accepted outcome unchanged; the form's answer arrives as a BranchChoice.
    data: Any = answer.data
    return data.branch if isinstance(data, BranchChoice) else data
