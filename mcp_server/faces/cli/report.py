"""Command-line parser of the experiment report: report."""

from __future__ import annotations

from mcp_server.faces.cli.commands import WORKSPACE_HELP, Subparsers, add_json, add_operation


def add_commands(sub: Subparsers) -> None:
    p = add_operation(sub, "report")
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument(
        "--out", help="a new FILE.html (default: report-<sha256>.html beside the binding)"
    )
    add_json(p)
