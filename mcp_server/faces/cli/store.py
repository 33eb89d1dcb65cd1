"""Command-line parsers of the wheel store and of recreating a bound engine: store, recreate."""

from __future__ import annotations

from mcp_server.faces.cli.commands import (
    PYTHON_HELP,
    WORKSPACE_HELP,
    Subparsers,
    add_json,
    add_operation,
)


def add_commands(sub: Subparsers) -> None:
    p = add_operation(sub, "store")
    p.add_argument("action", choices=("list", "verify", "keep", "gc"), help="what to do")
    p.add_argument(
        "--keep-bound", nargs="+", default=(), metavar="WORKSPACE",
        help="gc: keep every wheel a binding in these workspaces refers to",
    )  # fmt: skip
    p.add_argument("--experiment-id", help="keep: the experiment whose bound closure to keep")
    p.add_argument("--workspace", help=f"keep: {WORKSPACE_HELP}")
    add_json(p)

    p = add_operation(sub, "recreate")
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--python", required=True, help=f"the new environment; {PYTHON_HELP}")
    p.add_argument("--create-env", action="store_true", help="create the venv if it is missing")
    add_json(p)

    p = add_operation(sub, "lock")
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument(
        "--out", help="a new pylock.toml or pylock.NAME.toml (default: beside the binding)"
    )
    add_json(p)
