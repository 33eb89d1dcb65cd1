"""The command line's own handler of an experiment operation: `logs --follow` keeps printing the
log as it grows (the flags of every operation come from its request: `flags.py`)."""

from __future__ import annotations

import argparse

from mcp_server.errors import InvalidInput
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.logs import LogTail, follow_log
from mcp_server.faces.cli.commands import Outcome, request_fields, run_operation
from mcp_server.requests import LogsQuery


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
