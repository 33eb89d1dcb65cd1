"""Command-line parsers of the SLURM controller: `automl-setup slurm submit|status|cancel`
(operations), `slurm render` (the script submit would write, for review) and `slurm gate` (run
by the batch script on every allocation). The watcher's `slurm watch ...` subcommands are added
by `slurm_watch.add_commands(slurm_sub)`, its own module (the hook below)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from pathlib import Path

from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.faces.cli.commands import (
    PYTHON_HELP,
    WORKSPACE_HELP,
    Outcome,
    Subparsers,
    add_command,
    add_json,
    add_operation,
)
from mcp_server.slurm.template import EXIT_IDENTITY

WATCH_MODULE = "mcp_server.faces.cli.slurm_watch"


def _submit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--manifest", required=True, help="experiment manifest (YAML or JSON)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument(
        "--max-allocations", default="3", metavar="N",
        help="allocations in all, the first included (default 3: generations 0, 1, 2)",
    )  # fmt: skip


def add_commands(sub: Subparsers) -> None:
    slurm = add_command(
        sub, "slurm", "run an experiment across SLURM allocations",
        description="Run an experiment across SLURM allocations: submit binds it like launch "
        "and submits a controller job that requeues itself, each allocation gated on the "
        "node's engine being the bound build; status, cancel, render and the watcher beside.",
        example="automl-setup slurm submit --manifest m.yaml --workspace runs --python "
        ".venv-train --time 1:00:00",
    )  # fmt: skip
    slurm_sub = slurm.add_subparsers(dest="slurm_command", required=True, metavar="SUBCOMMAND")

    p = add_operation(slurm_sub, "slurm submit")
    _submit_flags(p)
    p.add_argument("--time", help="time limit (minutes, H:MM:SS, D-HH)")
    p.add_argument("--partition", help="partition (default: the cluster's)")
    p.add_argument(
        "--sbatch-arg", dest="sbatch_args", action="append", default=[], metavar="--OPT[=V]",
        help="extra sbatch option, one argv element each (repeatable)",
    )  # fmt: skip
    add_json(p)

    p = add_operation(slurm_sub, "slurm status")
    p.add_argument("--experiment-id", required=True, help="exact experiment id")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    add_json(p)

    p = add_operation(slurm_sub, "slurm cancel")
    p.add_argument("--experiment-id", required=True, help="exact experiment id")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--approve", action="store_true", help="the user said yes")
    add_json(p)

    p = add_command(
        slurm_sub, "render", "print the batch script submit would write",
        description="Print (or write to a new file) the controller batch script that submit "
        "would write for these flags, for review; nothing is bound or submitted.",
        example="automl-setup slurm render --manifest m.yaml --workspace runs --python .venv",
    )  # fmt: skip
    _submit_flags(p)
    p.add_argument("--output", type=Path, help="write it to this new file instead")
    p.set_defaults(handler=cmd_render, json=False)

    p = add_command(
        slurm_sub, "gate", "(run by the batch script) identity gate",
        description="Run by the controller batch script on every allocation, never by hand: "
        "check that this node's environment holds exactly the bound build before the engine "
        "runs, and record the allocation.",
        example="automl-setup slurm gate --experiment-id ID --workspace runs --python .venv "
        "--generation 1 --cap 3 --action resume",
        codes=((EXIT_IDENTITY, "the node's engine is not the bound build (never requeued)"),),
    )  # fmt: skip
    p.add_argument("--experiment-id", required=True, help="exact experiment id")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--python", required=True, help="this node's environment of the engine")
    p.add_argument("--generation", required=True, type=int, help="this allocation's number")
    p.add_argument("--cap", required=True, type=int, help="allocations in all")
    p.add_argument(
        "--action", choices=("run", "resume"), default="run", help="what the engine does next"
    )
    p.add_argument("--exhausted", action="store_true", help="the allocations are used up")
    p.set_defaults(handler=cmd_gate, json=False)

    # The watcher's subcommands live in their own module; it adds them here when it exists.
    if importlib.util.find_spec(WATCH_MODULE) is not None:
        importlib.import_module(WATCH_MODULE).add_commands(slurm_sub)


def cmd_render(args: argparse.Namespace) -> Outcome:
    from mcp_server.fsutil import exclusive_create
    from mcp_server.slurm.requests import SubmitRequest
    from mcp_server.slurm.submit import render_controller

    request = SubmitRequest(
        manifest=args.manifest, workspace=args.workspace, python=args.python,
        max_allocations=args.max_allocations,
    )  # fmt: skip
    text = render_controller(request)
    if args.output is None:
        return Outcome({"script": text}, text.removesuffix("\n"))  # print adds it back
    try:
        exclusive_create(args.output.absolute(), text.encode())
    except FileExistsError:
        raise InvalidInput(
            "slurm render", f"{args.output} already exists", "name a new file"
        ) from None
    return Outcome({"script_path": str(args.output)}, f"wrote {args.output}")


def cmd_gate(args: argparse.Namespace) -> Outcome:
    from mcp_server.slurm.gate import Allocation, gate
    from mcp_server.values import ExperimentId, TargetPath, WorkspacePath

    allocation = Allocation(
        experiment_id=ExperimentId(args.experiment_id), workspace=WorkspacePath(args.workspace),
        python=TargetPath(args.python), generation=args.generation, cap=args.cap,
        action=args.action,
    )  # fmt: skip
    try:
        text = gate(allocation, args.exhausted)
    except SetupError as exc:
        if exc.exit_code != ExitCode.REFUSED:
            raise
        # Its own code: the script tells a refusal (78, never requeued) from a crash (70).
        return Outcome({"error": exc.full_text()}, f"error: {exc.full_text()}", EXIT_IDENTITY)
    return Outcome({"message": text}, text)
