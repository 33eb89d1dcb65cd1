"""Command-line parsers of the experiment operations: launch, resume, status, list."""

from __future__ import annotations

from mcp_server.faces.cli_base import Subparsers, add_json, add_operation


def add_commands(sub: Subparsers) -> None:
    p = add_operation(sub, "launch", "start a new experiment bound to the verified engine")
    p.add_argument("--manifest", required=True, help="experiment manifest (YAML or JSON)")
    p.add_argument("--workspace", required=True, help="directory of experiments")
    p.add_argument("--python", help="environment of the engine (default: $VIRTUAL_ENV)")
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    add_json(p)

    p = add_operation(sub, "resume", "resume an experiment on exactly its bound engine")
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", required=True, help="directory of experiments")
    p.add_argument("--manifest", required=True, help="the manifest the experiment started with")
    p.add_argument("--python", help="environment of the engine (default: $VIRTUAL_ENV)")
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    add_json(p)

    p = add_operation(sub, "status", "state, trials, best and bound engine of an experiment")
    p.add_argument("--experiment-id", required=True)
    p.add_argument("--workspace", required=True)
    add_json(p)

    p = add_operation(sub, "list", "list the experiments of a workspace", aliases=("experiments",))
    p.add_argument("--workspace", required=True)
    add_json(p)
