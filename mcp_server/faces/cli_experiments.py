"""Command-line parsers of the experiment operations: launch, resume, status, list, stop, logs."""

from __future__ import annotations

import argparse

from mcp_server.errors import InvalidInput
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.logs import LogTail, follow_log
from mcp_server.faces.cli_base import (
    PYTHON_HELP,
    WORKSPACE_HELP,
    ExitCodes,
    Outcome,
    Subparsers,
    add_json,
    add_operation,
    request_fields,
    run_operation,
)
from mcp_server.requests import LogsQuery

ENGINE_EXIT: ExitCodes = (
    ("N", "in the foreground: the engine's own exit code (143: stopped by SIGTERM, its state "
     "saved; resume it)"),
)  # fmt: skip


def add_commands(sub: Subparsers) -> None:
    p = add_operation(
        sub, "launch", "start a new experiment bound to the verified engine",
        description="Verify the environment's engine against its record, have the engine check "
        "the manifest (plan), bind a new experiment to that exact build (binding.json) and run "
        "the engine on it, in the foreground with its progress, or detached.",
        example="automl-setup launch --manifest m.yaml --workspace runs --python .venv-train",
        codes=ENGINE_EXIT,
    )  # fmt: skip
    p.add_argument("--manifest", required=True, help="experiment manifest (YAML or JSON)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    add_json(p)

    p = add_operation(
        sub, "resume", "resume an experiment on exactly its bound engine",
        description="Resume an interrupted experiment on exactly the engine build it is bound "
        "to: the manifest's hash, the environment's record and every identity field must "
        "match, or it refuses naming each difference and the commands that recreate the bound "
        "engine. It never installs anything.",
        example="automl-setup resume --experiment-id ID --workspace runs --manifest m.yaml "
        "--python .venv-train",
        codes=ENGINE_EXIT,
    )  # fmt: skip
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--manifest", required=True, help="the manifest the experiment started with")
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    add_json(p)

    p = add_operation(
        sub, "status", "state, trials, best and bound engine of an experiment",
        description="Show an experiment's state (never `running` while no engine holds its "
        "lock), the trials done of those planned, the trials table, the best trial, the bound "
        "engine, the last attempt and, when it was interrupted, the exact resume command. "
        "Reads the records only.",
        example="automl-setup status --experiment-id ID --workspace runs",
    )  # fmt: skip
    p.add_argument("--experiment-id", required=True, help="exact experiment id")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    add_json(p)

    p = add_operation(
        sub, "list", "list the experiments of a workspace", aliases=("experiments",),
        description="List every experiment of a workspace with its status (as `status` shows "
        "it), and every experiment folder that cannot be read, with why.",
        example="automl-setup list --workspace runs",
    )  # fmt: skip
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    add_json(p)

    p = add_operation(
        sub, "stop", "stop an experiment's engine: SIGTERM, wait, report",
        description="Stop the engine automl-setup started for an experiment: SIGTERM, then wait "
        "up to the grace period for it to save its state and exit (with --kill, SIGKILL after "
        "it), and report what its ledger says; recorded in the attempts ledger.",
        example="automl-setup stop --experiment-id ID --workspace runs --grace 60",
    )  # fmt: skip
    p.add_argument("--experiment-id", required=True, help="exact experiment id")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--kill", action="store_true", help="SIGKILL it if still running after grace")
    p.add_argument(
        "--grace", type=float, default=30.0, metavar="S", help="seconds to wait (default: 30)"
    )
    add_json(p)

    p = add_operation(
        sub, "logs", "the tail of an attempt's or a trial's log (64 KiB at most)",
        description="Print the tail of an attempt's engine log (the last attempt by default) "
        "or of one trial's log, at most 64 KiB; with --follow, keep printing as it grows until "
        "the engine exits.",
        example="automl-setup logs --experiment-id ID --workspace runs --trial 3",
    )  # fmt: skip
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
