"""The `slurm` command: the group its operations (`slurm submit|status|cancel|watch`, from their
rows) are added under, and the commands of the command line only: `slurm render` (the script
submit would write, for review, with submit's own flags) and `slurm gate` (run by the batch
script on every allocation)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.faces.cli.commands import (
    Outcome,
    Parser,
    Subparsers,
    add_command,
    project_defaults,
)
from mcp_server.faces.cli.flags import add_fields
from mcp_server.faces.registry import row
from mcp_server.faces.registry.fields import build_request
from mcp_server.slurm.template import EXIT_IDENTITY

# The flags of `slurm submit` that the script depends on: `render` takes them too.
RENDERED = ("manifest", "workspace", "python", "max_allocations")


def add_group(sub: Subparsers) -> argparse.ArgumentParser:
    """The `slurm` command, under which its operations' subcommands are added."""
    return add_command(
        sub, "slurm", "run an experiment across SLURM allocations",
        description="Run an experiment across SLURM allocations: submit binds it like launch "
        "and submits a controller job that requeues itself, each allocation gated on the "
        "node's engine being the bound build; status, cancel, render and the watcher beside.",
        example="automl-setup slurm submit --manifest m.yaml --workspace runs --python "
        ".venv-train --time 1:00:00",
    )  # fmt: skip


def add_commands(slurm_sub: Subparsers) -> None:
    """`slurm render` and `slurm gate`: commands of the command line only."""
    p = add_command(
        slurm_sub, "render", "print the batch script submit would write",
        description="Print (or write to a new file) the controller batch script that submit "
        "would write for these flags, for review; nothing is bound or submitted.",
        example="automl-setup slurm render --manifest m.yaml --workspace runs --python .venv",
    )  # fmt: skip
    assert isinstance(p, Parser)
    p.pending = _render_flags
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
    p.add_argument(
        "--workspace", help="directory of experiments (default: the project file's workspace)"
    )
    p.add_argument("--python", required=True, help="this node's environment of the engine")
    p.add_argument("--generation", required=True, type=int, help="this allocation's number")
    p.add_argument("--cap", required=True, type=int, help="allocations in all")
    p.add_argument(
        "--action", choices=("run", "resume"), default="run", help="what the engine does next"
    )
    p.add_argument("--exhausted", action="store_true", help="the allocations are used up")
    p.set_defaults(handler=cmd_gate, json=False)


def _render_flags(parser: argparse.ArgumentParser) -> None:
    op = row("slurm submit")
    add_fields(parser, op, only=RENDERED)
    parser.add_argument("--output", type=Path, help="write it to this new file instead")


def cmd_render(args: argparse.Namespace) -> Outcome:
    from mcp_server.fsutil import exclusive_create
    from mcp_server.slurm.requests import SubmitRequest
    from mcp_server.slurm.submit import render_controller

    fields = project_defaults({f: getattr(args, f) for f in RENDERED}, workspace_needed=True)
    request = build_request(SubmitRequest, fields)
    assert isinstance(request, SubmitRequest)
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

    # --python is required (the script names this node's environment); the workspace may come
    # from the project file.
    workspace = project_defaults({"workspace": args.workspace}, workspace_needed=True)
    allocation = Allocation(
        experiment_id=ExperimentId(args.experiment_id),
        workspace=WorkspacePath(workspace["workspace"]), python=TargetPath(args.python),
        generation=args.generation, cap=args.cap, action=args.action,
    )  # fmt: skip
    try:
        text = gate(allocation, args.exhausted)
    except SetupError as exc:
        if exc.exit_code != ExitCode.REFUSED:
            raise
        # Its own code: the script tells a refusal (78, never requeued) from a crash (70).
        return Outcome({"error": exc.full_text()}, f"error: {exc.full_text()}", EXIT_IDENTITY)
    return Outcome({"message": text}, text)
