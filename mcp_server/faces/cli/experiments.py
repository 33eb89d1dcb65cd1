"""Command-line parsers of the experiment operations: launch, resume, status, list, stop, logs."""

from __future__ import annotations

import argparse

from mcp_server.errors import InvalidInput
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.logs import LogTail, follow_log
from mcp_server.faces.cli.commands import (
    PYTHON_HELP,
    WORKSPACE_HELP,
    Outcome,
    Subparsers,
    add_json,
    add_operation,
    request_fields,
    run_operation,
)
from mcp_server.requests import LogsQuery


def add_commands(sub: Subparsers) -> None:
    p = add_operation(sub, "launch")
    p.add_argument("--manifest", required=True, help="experiment manifest (YAML or JSON)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    add_json(p)

    p = add_operation(sub, "resume")
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--manifest", required=True, help="the manifest the experiment started with")
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    add_json(p)

    p = add_operation(sub, "status")
    p.add_argument("--experiment-id", required=True, help="exact experiment id")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    add_json(p)

    p = add_operation(sub, "list", aliases=("experiments",))
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    add_json(p)

    p = add_operation(sub, "stop")
    p.add_argument("--experiment-id", required=True, help="exact experiment id")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--kill", action="store_true", help="SIGKILL it if still running after grace")
    p.add_argument(
        "--grace", type=float, default=30.0, metavar="S", help="seconds to wait (default: 30)"
    )
    add_json(p)

    p = add_operation(sub, "logs")
    p.add_argument("--experiment-id", required=True, help="exact experiment id")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--attempt", type=int, metavar="N", help="attempt (default: the last)")
    which.add_argument("--trial", type=int, metavar="N", help="trial index (from 0)")
    p.add_argument("--follow", action="store_true", help="keep printing while the engine runs")
    add_json(p)
    p.set_defaults(handler=run_logs)


def run_logs(args: argparse.Namespace) -> Outcome:
    """`logs`, and with --follow the log as it grows, until its engine exits."""
    if args.follow and args.json:
        raise InvalidInput("logs", "--follow prints text as it comes", "drop --json or --follow")
    outcome = run_operation(args)
    if not args.follow:
        return outcome
    print(outcome.text, flush=True)
    assert isinstance(outcome.payload, LogTail)
    # The workspace the operation used (the flag, or the project file's).
    query = LogsQuery(**request_fields(args, LogsQuery))
    files = ExperimentFiles(query.workspace.path, query.experiment_id)
    follow_log(files, outcome.payload, lambda text: print(text, end="", flush=True))
    return Outcome(outcome.payload, "", outcome.code)
