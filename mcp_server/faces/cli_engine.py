"""Command-line parsers of the engine operations: resolve, install, verify, diagnose, repair,
history."""

from __future__ import annotations

from mcp_server.faces.cli_base import (
    PYTHON_HELP,
    Subparsers,
    add_json,
    add_operation,
    add_profile_flags,
)
from mcp_server.requests import DEFAULT_BRANCH


def add_commands(sub: Subparsers) -> None:
    p = add_operation(sub, "resolve", "resolve refs/heads/BRANCH to a full commit")
    p.add_argument("--branch", default=DEFAULT_BRANCH, help="branch name (default: main)")
    add_profile_flags(p)
    add_json(p)

    p = add_operation(sub, "install", "install the engine from a branch or commit")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--branch", help="branch to resolve and install (default: main)")
    which.add_argument("--commit", help="full commit id to install")
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--create-env", action="store_true", help="create the venv if it is missing")
    p.add_argument(
        "--extra", dest="extras", action="append", default=[], metavar="NAME",
        help="engine extra (repeatable)",
    )  # fmt: skip
    add_profile_flags(p)
    add_json(p)

    p = add_operation(
        sub, "verify", "check the installed engine against its record (and an experiment)"
    )
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--experiment-id", help="also compare with this experiment's binding")
    p.add_argument("--workspace", help="the workspace of --experiment-id")
    add_profile_flags(p)
    add_json(p)

    p = add_operation(sub, "diagnose", "explain what is (not) installed and how to fix it")
    p.add_argument("--python", help=PYTHON_HELP)
    add_profile_flags(p)
    add_json(p)

    for name, text in (
        ("repair", "roll back an interrupted install"),
        ("history", "list every install into an environment"),
    ):
        p = add_operation(sub, name, text)
        p.add_argument("--python", help=PYTHON_HELP)
        add_json(p)
