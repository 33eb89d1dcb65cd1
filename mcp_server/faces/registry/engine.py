"""The rows of the engine operations: resolve, branches, install, verify, diagnose, repair,
history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_server.faces.registry.row import (
    LOCAL_READ,
    STALL_FLAG,
    Flag,
    Hints,
    Operation,
    Row,
    Tool,
    healthy,
    own_exit_code,
    reporting,
)
from mcp_server.requests import (
    DEFAULT_BRANCH,
    BranchesQuery,
    DiagnoseQuery,
    HistoryQuery,
    InstallRequest,
    ProvenanceQuery,
    RepairRequest,
    ResolveRequest,
)
from mcp_server.source.profile import (
    DEFAULT_DISTRIBUTION,
    DEFAULT_REPOSITORY,
    DEFAULT_SUBDIRECTORY,
)

if TYPE_CHECKING:
    from mcp_server.environment.diagnose import Diagnosis
    from mcp_server.environment.install import InstallResult
    from mcp_server.operations import (
        BranchResolution,
        InstallHistory,
        ProvenanceReport,
        RepairResult,
    )
    from mcp_server.source.branches import BranchListing


def _resolve() -> Operation[ResolveRequest, BranchResolution]:
    from mcp_server.faces.render.engine import resolution_text
    from mcp_server.operations import BranchResolution, resolve
    from mcp_server.source.gitsource import RESOLVE_STEPS

    return reporting(resolve, BranchResolution, resolution_text, RESOLVE_STEPS)


def _branches() -> Operation[BranchesQuery, BranchListing]:
    from mcp_server.faces.render.source import branches_text
    from mcp_server.operations import branches
    from mcp_server.source.branches import BranchListing
    from mcp_server.source.gitsource import BRANCHES_STEPS

    return reporting(branches, BranchListing, branches_text, BRANCHES_STEPS)


def _install() -> Operation[InstallRequest, InstallResult]:
    from mcp_server.environment.install import STEPS, InstallResult
    from mcp_server.faces.render.engine import install_text
    from mcp_server.operations import install

    return reporting(install, InstallResult, install_text, STEPS)


def _verify() -> Operation[ProvenanceQuery, ProvenanceReport]:
    from mcp_server.faces.render.engine import provenance_text
    from mcp_server.operations import ProvenanceReport, verify

    return Operation(verify, ProvenanceReport, provenance_text)


def _diagnose() -> Operation[DiagnoseQuery, Diagnosis]:
    from mcp_server.environment.diagnose import Diagnosis
    from mcp_server.faces.render.engine import diagnosis_text
    from mcp_server.operations import diagnose

    return Operation(diagnose, Diagnosis, diagnosis_text)


def _repair() -> Operation[RepairRequest, RepairResult]:
    from mcp_server.faces.render.engine import repair_text
    from mcp_server.operations import RepairResult, repair

    return Operation(repair, RepairResult, repair_text)


def _history() -> Operation[HistoryQuery, InstallHistory]:
    from mcp_server.faces.render.engine import history_text
    from mcp_server.operations import InstallHistory, history

    return Operation(history, InstallHistory, history_text)


ROWS: tuple[Row[Any, Any], ...] = (
    Row(
        command="resolve",
        tool="resolve_branch",
        operation=_resolve,
        load_request=lambda: ResolveRequest,
        summary="resolve refs/heads/BRANCH to a full commit",
        description=(
            "Ask the engine repository which commit refs/heads/BRANCH points at now (exactly that "
            "ref: never a tag, another branch or a prefix) and print the full commit, changing "
            "nothing. Show it to the user, then install exactly it with `install --branch BRANCH "
            "--expect-commit COMMIT`."
        ),
        example="automl-setup resolve --branch dev/my-feature",
        title="Resolve a branch to a commit",
        hints=Hints(read_only=True, destructive=False, idempotent=True, open_world=True),
        flags={"branch": Flag(default=DEFAULT_BRANCH), **STALL_FLAG},
        mcp=Tool(
            "Resolve exactly refs/heads/<branch> of the engine repository to a full commit id (a "
            "tag or a missing branch is an error). Installs nothing; show the user the commit.",
        ),
    ),
    Row(
        command="branches",
        tool="list_branches",
        operation=_branches,
        load_request=lambda: BranchesQuery,
        summary="list the repository's branches (refs/heads/*) and commits",
        description=(
            "List the branches (refs/heads/*) of the engine repository with the commit each points "
            "at, so a user can pick one; reads refs only (with --with-subdirectory, trees too), "
            "changing nothing."
        ),
        example="automl-setup branches --with-subdirectory",
        title="List the engine repository's branches",
        hints=Hints(read_only=True, destructive=False, idempotent=True, open_world=True),
        flags=STALL_FLAG,
        mcp=Tool(
            "List the branches (refs/heads/*) of the engine repository with their commits, to "
            "offer the user real choices; the user picks one, never you. Installs nothing.",
        ),
    ),
    Row(
        command="install",
        tool="install_engine",
        operation=_install,
        load_request=lambda: InstallRequest,
        summary="install the engine from a branch or commit",
        description=(
            "Resolve the branch (or take the full commit), fetch exactly that source, build a "
            "wheel, check it and install it into the environment in one transaction that is "
            "verified and recorded, or rolled back. With neither --branch, --commit nor --wheel "
            f"the command line installs {DEFAULT_BRANCH}. The default engine is "
            f"{DEFAULT_DISTRIBUTION} from {DEFAULT_REPOSITORY}, subdirectory "
            f"{DEFAULT_SUBDIRECTORY} (another one: the profile flags, $AUTOML_SETUP_PROFILE or the "
            "project file)."
        ),
        example="automl-setup install --branch main --python .venv-train --create-env\n"
        "automl-setup install --branch dev/x --expect-commit COMMIT --python .venv-dev",
        title="Install the engine from source",
        hints=Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
        flags={
            **STALL_FLAG,
            "branch": Flag(help=f"branch to resolve and install (default: {DEFAULT_BRANCH})"),
            "expect_commit": Flag(metavar="COMMIT"),
            "extras": Flag(name="--extra", metavar="NAME"),
        },
        exclusive=(("branch", "commit", "wheel"),),
        why="with neither branch, commit nor wheel, the command line installs main (its "
        "documented default) while the MCP tool asks the user: an agent never picks a branch",
        mcp=Tool(
            "Install the engine from source at an exact commit into `python`: resolve, fetch, "
            "build a reproducible wheel, check it, install it, verify it against RECORD, and "
            "record it. Or, with wheel and sha256, install that reviewed wheel exactly (origin "
            'reviewed-wheel). Without branch, commit or wheel the user is asked "main, or which '
            'development branch?". Pass the commit the user confirmed as expect_commit with the '
            "branch. On any failure the previous engine and its record stay exactly as they were.",
            asks_branch=True,
        ),
    ),
    Row(
        command="verify",
        tool="verify_engine",
        operation=_verify,
        load_request=lambda: ProvenanceQuery,
        summary="check the installed engine against its record (and an experiment)",
        description="Check the engine installed in the environment against its install record: "
        "direct_url.json, every file's RECORD hash, the wheel's files, the console scripts and "
        "the identity digest; with --experiment-id, also against that experiment's binding. "
        "Changes nothing.",
        example="automl-setup verify --python .venv-train",
        title="Verify the engine against its record",
        hints=LOCAL_READ,
        exit_rule=own_exit_code,
        mcp=Tool(
            "Verify the engine installed in `python` against its record (direct_url.json commit, "
            "RECORD hashes, identity digest); with experiment_id and workspace, also compare it "
            "field by field with the exact build that experiment is bound to.",
        ),
    ),
    Row(
        command="diagnose",
        tool="diagnose_engine",
        operation=_diagnose,
        load_request=lambda: DiagnoseQuery,
        summary="explain what is (not) installed and how to fix it",
        description=(
            "Explain what the environment holds: the engine and its verify status, a look-alike "
            "package when one is installed, an unfinished install, one line per fact, and the "
            "commands that install the core when it is missing or does not verify."
        ),
        example="automl-setup diagnose --python .venv-train",
        title="Diagnose the engine installation",
        hints=LOCAL_READ,
        exit_rule=healthy,
        mcp=Tool(
            "Explain what is (not) installed in `python`: the core engine, look-alike packages "
            "that do not provide it, the state of its record, and the commands that install it "
            "from source.",
        ),
    ),
    Row(
        command="repair",
        tool="repair_engine",
        operation=_repair,
        load_request=lambda: RepairRequest,
        summary="roll back an interrupted install",
        description=(
            "Roll back an install that was killed part-way, from its journal and backup, restoring "
            "the previous engine and record (or finish one that had completed); nothing to do is "
            "not an error."
        ),
        example="automl-setup repair --python .venv-train",
        title="Repair an interrupted install",
        # Rolls the environment back; a second call finds nothing to repair; uv may fetch the
        # previous dependency versions from an index.
        hints=Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
        flags=STALL_FLAG,
        mcp=Tool(
            "Roll back an install into `python` that was killed halfway (or finish one whose "
            "record was already written), so the previous engine is back exactly; says so when "
            "there is nothing to repair. Refused while an install is running. uv putting back "
            "the previous dependency versions is given up on after `stall_timeout` seconds "
            "without progress.",
        ),
    ),
    Row(
        command="history",
        tool="history_engine",
        operation=_history,
        load_request=lambda: HistoryQuery,
        summary="list every install into an environment",
        description=(
            "List every install and rollback recorded in the environment's history, oldest first: "
            "time, event, commit and the ref it was installed from (or the reviewed wheel)."
        ),
        example="automl-setup history --python .venv-train",
        title="Install history of an environment",
        hints=LOCAL_READ,
        mcp=Tool(
            "Every install of the engine into the environment and every rollback, oldest first.",
        ),
    ),
)
