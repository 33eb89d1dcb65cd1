"""The rows of the engine operations: resolve, branches, install, verify, diagnose, repair,
history."""

from __future__ import annotations

from mcp_server.faces.registry.row import (
    LOCAL_READ,
    STALL_FLAG,
    Flag,
    Hints,
    Row,
    Tool,
    healthy,
    own_exit_code,
)
from mcp_server.requests import DEFAULT_BRANCH
from mcp_server.source.profile import (
    DEFAULT_DISTRIBUTION,
    DEFAULT_REPOSITORY,
    DEFAULT_SUBDIRECTORY,
)

OPS, REQ, RENDER = "mcp_server.operations", "mcp_server.requests", "mcp_server.faces.render"

ROWS: tuple[Row, ...] = (
    Row(
        "resolve",
        "resolve_branch",
        f"{OPS}:resolve",
        f"{REQ}:ResolveRequest",
        f"{OPS}:BranchResolution",
        f"{RENDER}.engine:resolution_text",
        "resolve refs/heads/BRANCH to a full commit",
        "Ask the engine repository which commit refs/heads/BRANCH points at now (exactly that "
        "ref: never a tag, another branch or a prefix) and print the full commit, changing "
        "nothing. Show it to the user, then install exactly it with `install --branch BRANCH "
        "--expect-commit COMMIT`.",
        "automl-setup resolve --branch dev/my-feature",
        "Resolve a branch to a commit",
        Hints(read_only=True, destructive=False, idempotent=True, open_world=True),
        flags={"branch": Flag(default=DEFAULT_BRANCH), **STALL_FLAG},
        mcp=Tool(
            "Resolve exactly refs/heads/<branch> of the engine repository to a full commit id (a "
            "tag or a missing branch is an error). Installs nothing; show the user the commit.",
            steps="mcp_server.source.gitsource:RESOLVE_STEPS",
        ),
    ),
    Row(
        "branches",
        "list_branches",
        f"{OPS}:branches",
        f"{REQ}:BranchesQuery",
        "mcp_server.source.branches:BranchListing",
        f"{RENDER}.source:branches_text",
        "list the repository's branches (refs/heads/*) and commits",
        "List the branches (refs/heads/*) of the engine repository with the commit each points "
        "at, so a user can pick one; reads refs only (with --with-subdirectory, trees too), "
        "changing nothing.",
        "automl-setup branches --with-subdirectory",
        "List the engine repository's branches",
        Hints(read_only=True, destructive=False, idempotent=True, open_world=True),
        flags=STALL_FLAG,
        mcp=Tool(
            "List the branches (refs/heads/*) of the engine repository with their commits, to "
            "offer the user real choices; the user picks one, never you. Installs nothing.",
            steps="mcp_server.source.gitsource:BRANCHES_STEPS",
        ),
    ),
    Row(
        "install",
        "install_engine",
        f"{OPS}:install",
        f"{REQ}:InstallRequest",
        "mcp_server.environment.install:InstallResult",
        f"{RENDER}.engine:install_text",
        "install the engine from a branch or commit",
        "Resolve the branch (or take the full commit), fetch exactly that source, build a "
        "wheel, check it and install it into the environment in one transaction that is "
        "verified and recorded, or rolled back. With neither --branch, --commit nor --wheel "
        f"the command line installs {DEFAULT_BRANCH}. The default engine is "
        f"{DEFAULT_DISTRIBUTION} from {DEFAULT_REPOSITORY}, subdirectory {DEFAULT_SUBDIRECTORY} "
        "(another one: the profile flags, $AUTOML_SETUP_PROFILE or the project file).",
        "automl-setup install --branch main --python .venv-train --create-env\n"
        "automl-setup install --branch dev/x --expect-commit COMMIT --python .venv-dev",
        "Install the engine from source",
        # Replaces the installed engine; a branch may have moved since the last call; fetches.
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
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
            steps="mcp_server.environment.install:STEPS",
            asks_branch=True,
        ),
    ),
    Row(
        "verify",
        "verify_engine",
        f"{OPS}:verify",
        f"{REQ}:ProvenanceQuery",
        f"{OPS}:ProvenanceReport",
        f"{RENDER}.engine:provenance_text",
        "check the installed engine against its record (and an experiment)",
        "Check the engine installed in the environment against its install record: "
        "direct_url.json, every file's RECORD hash, the wheel's files, the console scripts and "
        "the identity digest; with --experiment-id, also against that experiment's binding. "
        "Changes nothing.",
        "automl-setup verify --python .venv-train",
        "Verify the engine against its record",
        LOCAL_READ,
        exit_rule=own_exit_code,
        mcp=Tool(
            "Verify the engine installed in `python` against its record (direct_url.json commit, "
            "RECORD hashes, identity digest); with experiment_id and workspace, also compare it "
            "field by field with the exact build that experiment is bound to.",
        ),
    ),
    Row(
        "diagnose",
        "diagnose_engine",
        f"{OPS}:diagnose",
        f"{REQ}:DiagnoseQuery",
        "mcp_server.environment.diagnose:Diagnosis",
        f"{RENDER}.engine:diagnosis_text",
        "explain what is (not) installed and how to fix it",
        "Explain what the environment holds: the engine and its verify status, a look-alike "
        "package when one is installed, an unfinished install, one line per fact, and the "
        "commands that install the core when it is missing or does not verify.",
        "automl-setup diagnose --python .venv-train",
        "Diagnose the engine installation",
        LOCAL_READ,
        exit_rule=healthy,
        mcp=Tool(
            "Explain what is (not) installed in `python`: the core engine, look-alike packages "
            "that do not provide it, the state of its record, and the commands that install it "
            "from source.",
        ),
    ),
    Row(
        "repair",
        "repair_engine",
        f"{OPS}:repair",
        f"{REQ}:RepairRequest",
        f"{OPS}:RepairResult",
        f"{RENDER}.engine:repair_text",
        "roll back an interrupted install",
        "Roll back an install that was killed part-way, from its journal and backup, restoring "
        "the previous engine and record (or finish one that had completed); nothing to do is "
        "not an error.",
        "automl-setup repair --python .venv-train",
        "Repair an interrupted install",
        # Rolls the environment back; a second call finds nothing to repair; uv may fetch the
        # previous dependency versions from an index.
        Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
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
        "history",
        "history_engine",
        f"{OPS}:history",
        f"{REQ}:HistoryQuery",
        f"{OPS}:InstallHistory",
        f"{RENDER}.engine:history_text",
        "list every install into an environment",
        "List every install and rollback recorded in the environment's history, oldest first: "
        "time, event, commit and the ref it was installed from (or the reviewed wheel).",
        "automl-setup history --python .venv-train",
        "Install history of an environment",
        LOCAL_READ,
        mcp=Tool(
            "Every install of the engine into the environment and every rollback, oldest first.",
        ),
    ),
)
