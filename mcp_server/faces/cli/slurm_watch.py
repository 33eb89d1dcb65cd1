"""Command-line parsers of the SLURM watcher: `slurm watch` (a tick, once or every S seconds)
and `slurm watch register` (adopt an existing job). Added under the `slurm` command by
`slurm.add_commands`."""

from __future__ import annotations

import argparse
import sys
import time

from mcp_server.errors import InvalidInput
from mcp_server.faces.cli.commands import (
    WORKSPACE_HELP,
    Outcome,
    Subparsers,
    add_json,
    add_operation,
    run_operation,
)


def add_commands(slurm_sub: Subparsers) -> None:
    p = add_operation(slurm_sub, "slurm watch")
    # Not required here: `slurm watch register --workspace W` parses its own (argparse checks
    # the parent's required flags too); the handler insists instead.
    p.add_argument("--workspace", help="directory of experiments (its registry)")
    p.add_argument("--once", action="store_true", help="one tick, then exit")
    p.add_argument("--interval", type=float, help="seconds between ticks, until interrupted")
    p.add_argument(
        "--pending-after",
        type=int,
        default=3600,
        help="seconds a job may wait before it is reported (default 3600)",
    )
    add_json(p)
    p.set_defaults(handler=watch)

    sub = p.add_subparsers(dest="watch_command", metavar="register")
    r = add_operation(sub, "slurm watch register")
    r.add_argument("--job-id", required=True, help="the id sbatch printed")
    r.add_argument("--experiment-id", required=True, help="the experiment the job runs")
    r.add_argument("--workspace", help=WORKSPACE_HELP)
    add_json(r)


def watch(args: argparse.Namespace) -> Outcome:
    """One tick, or one every --interval seconds until interrupted (each printed as it ends:
    text, or one JSON document per line with --json)."""
    if args.workspace is None:
        raise InvalidInput("watch", "--workspace is required", "pass --workspace DIR")
    if args.interval is None:
        return run_operation(args)
    while True:
        outcome = run_operation(args)
        payload = outcome.payload
        text = payload.model_dump_json() if args.json else outcome.text  # type: ignore[union-attr]
        print(text, flush=True)
        if outcome.code:
            print("(the next tick asks again)", file=sys.stderr, flush=True)
        time.sleep(args.interval)
