"""`automl-setup`: the command-line face. Every command calls the same core function as the
matching MCP tool and prints the same message; this module only parses and formats."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcp_server import __build__
from mcp_server.errors import ExitCode, SetupError
from mcp_server.faces.cli import completion, config, init, slurm
from mcp_server.faces.cli.commands import (
    Handler,
    Outcome,
    Parser,
    Subparsers,
    add_command,
    add_operation,
    run_operation,
)
from mcp_server.faces.registry import INTERRUPTED, PIPE_CLOSED, ROWS
from mcp_server.fsutil import storage_refusals
from mcp_server.redact import redact_text

# The groups an operation of several words is added under: the `slurm` command, and `slurm
# watch`, an operation of its own (`slurm watch register` below it): (dest, required, metavar).
GROUPS = {
    ("slurm",): ("slurm_command", True, "SUBCOMMAND"),
    ("slurm", "watch"): ("watch_command", False, "register"),
}


def run_logs(args: argparse.Namespace) -> Outcome:
    from mcp_server.faces.cli.experiments import run_logs as run  # imported when it runs

    return run(args)


def run_watch(args: argparse.Namespace) -> Outcome:
    from mcp_server.faces.cli.slurm_watch import watch

    return watch(args)


# The operations the command line runs with a handler of its own, not `run_operation`: what
# only it does (their rows' `why`: `logs --follow`, `slurm watch --interval`).
OWN_HANDLERS: dict[str, Handler] = {"logs": run_logs, "slurm watch": run_watch}


def add_operations(sub: Subparsers) -> None:
    """Every operation's subcommand, in the registry's order (`faces/registry/`), each under its
    group; then the `slurm` commands of the command line only."""
    parsers: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    groups: dict[tuple[str, ...], Subparsers] = {(): sub}

    def group(words: tuple[str, ...]) -> Subparsers:
        if words not in groups:
            if words not in parsers:  # a group that is no operation: the `slurm` command
                parsers[words] = slurm.add_group(group(words[:-1]))
            dest, required, metavar = GROUPS[words]
            groups[words] = parsers[words].add_subparsers(
                dest=dest, required=required, metavar=metavar
            )
        return groups[words]

    for op in ROWS:
        words = tuple(op.command.split())
        handler = OWN_HANDLERS.get(op.command, run_operation)
        parsers[words] = add_operation(group(words[:-1]), op, handler)
    slurm.add_commands(group(("slurm",)))


def cmd_demo(args: argparse.Namespace) -> Outcome:
    if args.sft:
        from mcp_server.faces.cli.demo_sft import run_sft_demo as run_demo
    else:
        from mcp_server.faces.cli.demo import run_demo

    code = run_demo(args.workdir, lambda line: print(line, flush=True))
    return Outcome({"exit_code": code}, "", code)


# --------------------------------------------------------------------------------------------
# Parser


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="automl-setup",
        description="Install an AutoML core engine from source, verified and recorded.",
    )
    parser.add_argument("--version", action="version", version=f"automl-setup {__build__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    init.add_commands(sub)
    add_operations(sub)
    config.add_commands(sub)
    completion.add_commands(sub)

    p = add_command(
        sub, "demo", "the whole story on the embedded reference engine",
        description="Build a local git repository of the embedded reference engine, install "
        "main into a fresh environment, launch an experiment, interrupt and resume it, show the "
        "provenance, refuse the resume on a dev/next install field by field, and write the "
        "report; with --sft, the SFT AutoML run on CPU.",
        example="automl-setup demo --workdir /tmp/automl-demo",
    )  # fmt: skip
    p.add_argument("--workdir", type=Path, help="where to put everything (default: a temp dir)")
    p.add_argument(
        "--sft", action="store_true", help="the SFT run on CPU: LoRA candidates, export, scores"
    )
    p.set_defaults(handler=cmd_demo, json=False)

    # Listed for --help only: main() hands `skills ...` to the skills command before parsing.
    add_command(
        sub, "skills", "skills sync|check|manifest|links (see `skills --help`)",
        description="Validate a repository's agent skills (graded findings; text, JSON or "
        "GitHub annotations), sync them to the discovery paths (.claude/skills, "
        ".agents/skills), print their manifest or check their links: `automl-setup skills "
        "--help` lists the commands.",
        example="automl-setup skills sync\nautoml-setup skills check",
    )  # fmt: skip

    p = add_command(
        sub, "mcp", "run the MCP server over stdio (same as automl-setup-mcp)",
        description="Run the MCP server on stdin and stdout, for a coding agent (Claude Code, "
        "Codex) to start; every tool calls the same operation as its command here.",
        example="automl-setup mcp",
    )  # fmt: skip
    p.set_defaults(handler=None)
    parser.set_defaults(root_parser=parser)  # `completion` generates from the whole parser
    return parser


def _dump(payload: BaseModel | dict[str, Any]) -> str:
    if isinstance(payload, BaseModel):
        return payload.model_dump_json(indent=2)
    return json.dumps(payload, indent=2, default=str)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:  # output piped into `head` and the like, --help included
        # Quiet, and the status of a process SIGPIPE ended; stdout is made harmless so the
        # interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return PIPE_CLOSED


def _main(argv: list[str]) -> int:
    if argv[:1] == ["skills"]:
        from mcp_server.skills.cli import cli_main

        return cli_main(argv[1:])
    parser = build_parser()
    Parser.json_errors = "--json" in argv
    args = parser.parse_args(argv)
    if args.command == "mcp":
        from mcp_server.faces.mcp.server import main as serve

        return serve()
    return _run(args, getattr(args, "json", False))


def _error_payload(exc: SetupError) -> dict[str, Any]:
    return {
        "error": {
            "step": exc.step,
            "cause": exc.cause,
            "remedy": exc.remedy,
            "details": exc.details,
            "exit_code": int(exc.exit_code),
        }
    }


def _run(args: argparse.Namespace, as_json: bool) -> int:
    try:
        with storage_refusals(args.command):  # full or read-only where no state access caught it
            outcome: Outcome = args.handler(args)
    except SetupError as exc:
        if as_json:
            print(_dump(_error_payload(exc)))
        print(f"error: {exc.full_text()}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # not a bug: main() ends quietly
        raise
    except Exception as exc:  # a bug: say so in one line, keep the traceback for a report
        if os.environ.get("AUTOML_SETUP_DEBUG"):
            raise
        print(
            f"error: unexpected failure ({type(exc).__name__}: {redact_text(str(exc))}); this is "
            "a bug: rerun with AUTOML_SETUP_DEBUG=1 and report the traceback",
            file=sys.stderr,
        )
        return int(ExitCode.REFUSED)
    if as_json or outcome.text:
        print(_dump(outcome.payload) if as_json else outcome.text, flush=True)
    return int(outcome.code)


if __name__ == "__main__":
    sys.exit(main())
