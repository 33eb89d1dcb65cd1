"""Command-line parsers of the engine operations: resolve, branches, install, verify, diagnose,
repair, history."""

from __future__ import annotations

from mcp_server.faces.cli.commands import (
    PYTHON_HELP,
    Subparsers,
    add_json,
    add_operation,
    add_profile_flags,
)
from mcp_server.requests import DEFAULT_BRANCH


def add_commands(sub: Subparsers) -> None:
    p = add_operation(sub, "resolve")
    p.add_argument("--branch", default=DEFAULT_BRANCH, help="branch name (default: main)")
    add_profile_flags(p)
    add_json(p)

    p = add_operation(sub, "branches")
    p.add_argument(
        "--with-subdirectory", action="store_true",
        help="only branches whose head holds the profile's subdirectory (reads trees, no files)",
    )  # fmt: skip
    add_profile_flags(p)
    add_json(p)

    p = add_operation(sub, "install")
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

    p = add_operation(sub, "verify")
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--experiment-id", help="also compare with this experiment's binding")
    p.add_argument("--workspace", help="the workspace of --experiment-id")
    p.add_argument(
        "--deep", action="store_true",
        help="also hash every file of the engine's dependency closure against its RECORD",
    )  # fmt: skip
    add_profile_flags(p)
    add_json(p)

    p = add_operation(sub, "diagnose")
    p.add_argument("--python", help=PYTHON_HELP)
    add_profile_flags(p)
    add_json(p)

    for name in ("repair", "history"):
        p = add_operation(sub, name)
        p.add_argument("--python", help=PYTHON_HELP)
        add_json(p)
