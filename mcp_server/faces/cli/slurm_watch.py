"""The command line's own handler of `slurm watch`: a tick once, or one every --interval seconds
until interrupted (its flags and `slurm watch register`'s come from their requests)."""

from __future__ import annotations

import argparse
import sys
import time

from pydantic import BaseModel

from mcp_server.errors import InvalidInput
from mcp_server.faces.cli.commands import Outcome, run_operation


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
        assert isinstance(payload, BaseModel)  # an operation's payload is its result
        text = payload.model_dump_json() if args.json else outcome.text
        print(text, flush=True)
        if outcome.code:
            print("(the next tick asks again)", file=sys.stderr, flush=True)
        time.sleep(args.interval)
