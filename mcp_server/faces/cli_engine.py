"""Command-line parsers of the engine operations: resolve, branches, install, verify, diagnose,
repair, history."""

from __future__ import annotations

from mcp_server.faces.cli_base import (
    NOTHING_INSTALLED,
    PYTHON_HELP,
    Subparsers,
    add_json,
    add_operation,
    add_profile_flags,
)
from mcp_server.requests import DEFAULT_BRANCH
from mcp_server.source.profile import (
    DEFAULT_DISTRIBUTION,
    DEFAULT_REPOSITORY,
    DEFAULT_SUBDIRECTORY,
)


def add_commands(sub: Subparsers) -> None:
    p = add_operation(
        sub, "resolve", "resolve refs/heads/BRANCH to a full commit",
        description="Ask the engine repository which commit refs/heads/BRANCH points at now "
        "(exactly that ref: never a tag, another branch or a prefix) and print the full commit, "
        "changing nothing. Show it to the user, then install exactly it with `install --branch "
        "BRANCH --expect-commit COMMIT`.",
        example="automl-setup resolve --branch dev/my-feature",
    )  # fmt: skip
    p.add_argument("--branch", default=DEFAULT_BRANCH, help="branch name (default: main)")
    add_profile_flags(p)
    add_json(p)

    p = add_operation(
        sub, "branches", "list the repository's branches (refs/heads/*) and commits",
        description="List the branches (refs/heads/*) of the engine repository with the commit "
        "each points at, so a user can pick one; reads refs only (with --with-subdirectory, "
        "trees too), changing nothing.",
        example="automl-setup branches --with-subdirectory",
    )  # fmt: skip
    p.add_argument(
        "--with-subdirectory", action="store_true",
        help="only branches whose head holds the profile's subdirectory (reads trees, no files)",
    )  # fmt: skip
    add_profile_flags(p)
    add_json(p)

    p = add_operation(
        sub, "install", "install the engine from a branch or commit",
        description="Resolve the branch (or take the full commit), fetch exactly that source, "
        "build a wheel, check it and install it into the environment in one transaction that "
        "is verified and recorded, or rolled back. With neither --branch nor --commit the "
        f"command line installs {DEFAULT_BRANCH}. The default engine is {DEFAULT_DISTRIBUTION} "
        f"from {DEFAULT_REPOSITORY}, subdirectory {DEFAULT_SUBDIRECTORY} (another one: the "
        "profile flags, $AUTOML_SETUP_PROFILE or the project file).",
        example="automl-setup install --branch main --python .venv-train --create-env\n"
        "automl-setup install --branch dev/x --expect-commit COMMIT --python .venv-dev",
    )  # fmt: skip
    which = p.add_mutually_exclusive_group()
    which.add_argument("--branch", help="branch to resolve and install (default: main)")
    which.add_argument("--commit", help="full commit id to install")
    p.add_argument(
        "--expect-commit", metavar="COMMIT",
        help="with --branch: refuse, changing nothing, unless the branch still points at COMMIT "
        "(the commit resolve showed and the user confirmed)",
    )  # fmt: skip
    which.add_argument("--wheel", help="a reviewed wheel file to install exactly (with --sha256)")
    p.add_argument("--sha256", help="the reviewed wheel's sha256, checked before anything")
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--create-env", action="store_true", help="create the venv if it is missing")
    p.add_argument(
        "--extra", dest="extras", action="append", default=[], metavar="NAME",
        help="engine extra (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--require-pinned", action="store_true",
        help="refuse, changing nothing, if a dependency resolves from a moving reference (a VCS "
        "or URL requirement naming no commit)",
    )  # fmt: skip
    add_profile_flags(p)
    add_json(p)

    p = add_operation(
        sub, "verify", "check the installed engine against its record (and an experiment)",
        description="Check the engine installed in the environment against its install record: "
        "direct_url.json, every file's RECORD hash, the wheel's files, the console scripts and "
        "the identity digest; with --experiment-id, also against that experiment's binding. "
        "Changes nothing.",
        example="automl-setup verify --python .venv-train",
        codes=NOTHING_INSTALLED,
    )  # fmt: skip
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--experiment-id", help="also compare with this experiment's binding")
    p.add_argument("--workspace", help="the workspace of --experiment-id")
    p.add_argument(
        "--deep", action="store_true",
        help="also hash every file of the engine's dependency closure against its RECORD",
    )  # fmt: skip
    add_profile_flags(p)
    add_json(p)

    p = add_operation(
        sub, "diagnose", "explain what is (not) installed and how to fix it",
        description="Explain what the environment holds: the engine and its verify status, a "
        "look-alike package when one is installed, an unfinished install, one line per fact, "
        "and the commands that install the core when it is missing or does not verify.",
        example="automl-setup diagnose --python .venv-train",
    )  # fmt: skip
    p.add_argument("--python", help=PYTHON_HELP)
    add_profile_flags(p)
    add_json(p)

    for name, text, description in (
        ("repair", "roll back an interrupted install", "Roll back an install that was killed "
         "part-way, from its journal and backup, restoring the previous engine and record (or "
         "finish one that had completed); nothing to do is not an error."),
        ("history", "list every install into an environment", "List every install and "
         "rollback recorded in the environment's history, oldest first: time, event, commit "
         "and the ref it was installed from."),
    ):  # fmt: skip
        p = add_operation(
            sub, name, text, description=description,
            example=f"automl-setup {name} --python .venv-train",
        )  # fmt: skip
        p.add_argument("--python", help=PYTHON_HELP)
        add_json(p)
