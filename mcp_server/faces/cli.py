"""`automl-setup`: the command-line face. Every command calls the same core function as the
matching MCP tool and prints the same message; this module only parses and formats."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from mcp_server import __version__
from mcp_server.errors import ExitCode, SetupError
from mcp_server.faces import messages
from mcp_server.redact import redact_text
from mcp_server.requests import DEFAULT_BRANCH
from mcp_server.source.profile import EngineProfile, load_profile


class Outcome:
    """What a command produced: a model for --json, lines for people, an exit code."""

    def __init__(self, payload: BaseModel | dict[str, Any], text: str, code: int = 0) -> None:
        self.payload, self.text, self.code = payload, text, code


def _profile(args: argparse.Namespace) -> EngineProfile:
    return load_profile(
        args.profile,
        repository=args.repository,
        subdirectory=args.subdirectory,
        distribution=args.distribution,
        requirement=args.requirement,
    )


def _progress_printer(enabled: bool) -> Callable[[str, str], None]:
    from mcp_server.environment.install import STEPS

    def emit(step: str, message: str) -> None:
        if not enabled:
            return
        where = f"{STEPS.index(step) + 1}/{len(STEPS)} " if step in STEPS else ""
        print(f"[{where}{step}] {message}", file=sys.stderr, flush=True)

    return emit


# --------------------------------------------------------------------------------------------
# Commands: every operation the same way (its request from the parsed flags, the operation,
# the text messages.py writes for its result); the demo is the one command of its own.


def request_fields(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The request's fields from the flags of the same name (the profile from its group)."""
    fields = {
        name: _profile(args) if name == "profile" else getattr(args, name)
        for name in model.model_fields
    }
    if args.operation == "install" and fields["branch"] is None and fields["commit"] is None:
        fields["branch"] = DEFAULT_BRANCH  # a person at the command line; agents are asked
    return fields


def run_operation(args: argparse.Namespace) -> Outcome:
    from mcp_server.operations import OPERATIONS, install

    (operation,) = (op for op in OPERATIONS if op.command == args.operation)
    request = operation.request(**request_fields(args, operation.request))
    if operation.run is install:
        result = install(request, _progress_printer(not args.json))  # type: ignore[arg-type]
    else:
        result = operation.run(request)
    return Outcome(result, messages.render(args.operation, result), messages.exit_code(result))


def cmd_demo(args: argparse.Namespace) -> Outcome:
    from mcp_server.faces.demo import run_demo

    code = run_demo(args.workdir, lambda line: print(line, flush=True))
    return Outcome({"exit_code": code}, "", code)


# --------------------------------------------------------------------------------------------
# Parser


class _Parser(argparse.ArgumentParser):
    """Usage errors as one JSON document on stdout too, when --json was asked for."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            cause = {"step": "parse arguments", "cause": message, "exit_code": 2}
            print(json.dumps({"error": {**cause, "remedy": f"see {self.prog} --help"}}))
        super().error(message)


def _add_profile_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "engine profile (flags win over --profile, which wins over the default)"
    )
    group.add_argument("--profile", type=Path, help="TOML profile file")
    group.add_argument("--repository", help="git URL: https://, ssh://, git@host:path, file://")
    group.add_argument("--subdirectory", help="path of the engine package in the repository")
    group.add_argument("--distribution", help="distribution name the wheel must have")
    group.add_argument("--requirement", help="version specifier the wheel must satisfy")


def _add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


PYTHON_HELP = "interpreter or venv directory (default: $VIRTUAL_ENV)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="automl-setup",
        description="Install an AutoML core engine from source, verified and recorded.",
    )
    parser.add_argument("--version", action="version", version=f"automl-setup {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def operation(
        name: str, text: str, *, aliases: tuple[str, ...] = ()
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=text, aliases=list(aliases))
        p.set_defaults(handler=run_operation, operation=name)
        return p

    p = operation("resolve", "resolve refs/heads/BRANCH to a full commit")
    p.add_argument("--branch", default=DEFAULT_BRANCH, help="branch name (default: main)")
    _add_profile_flags(p)
    _add_json(p)

    p = operation("install", "install the engine from a branch or commit")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--branch", help="branch to resolve and install (default: main)")
    which.add_argument("--commit", help="full commit id to install")
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--create-env", action="store_true", help="create the venv if it is missing")
    p.add_argument(
        "--extra", dest="extras", action="append", default=[], metavar="NAME",
        help="engine extra (repeatable)",
    )  # fmt: skip
    _add_profile_flags(p)
    _add_json(p)

    p = operation("verify", "check the installed engine against its record (and an experiment)")
    p.add_argument("--python", help=PYTHON_HELP)
    p.add_argument("--experiment-id", help="also compare with this experiment's binding")
    p.add_argument("--workspace", help="the workspace of --experiment-id")
    _add_profile_flags(p)
    _add_json(p)

    p = operation("diagnose", "explain what is (not) installed and how to fix it")
    p.add_argument("--python", help=PYTHON_HELP)
    _add_profile_flags(p)
    _add_json(p)

    for name, text in (
        ("repair", "roll back an interrupted install"),
        ("history", "list every install into an environment"),
    ):
        p = operation(name, text)
        p.add_argument("--python", help=PYTHON_HELP)
        _add_json(p)

    p = operation("launch", "start a new experiment bound to the verified engine")
    p.add_argument("--manifest", required=True, help="experiment manifest (YAML or JSON)")
    p.add_argument("--workspace", required=True, help="directory of experiments")
    p.add_argument("--python", help="environment of the engine (default: $VIRTUAL_ENV)")
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    _add_json(p)

    p = operation("resume", "resume an experiment on exactly its bound engine")
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", required=True, help="directory of experiments")
    p.add_argument("--manifest", required=True, help="the manifest the experiment started with")
    p.add_argument("--python", help="environment of the engine (default: $VIRTUAL_ENV)")
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    _add_json(p)

    p = operation("status", "state, trials, best and bound engine of an experiment")
    p.add_argument("--experiment-id", required=True)
    p.add_argument("--workspace", required=True)
    _add_json(p)

    p = operation("list", "list the experiments of a workspace", aliases=("experiments",))
    p.add_argument("--workspace", required=True)
    _add_json(p)

    p = sub.add_parser("demo", help="the whole story on the embedded reference engine")
    p.add_argument("--workdir", type=Path, help="where to put everything (default: a temp dir)")
    p.set_defaults(handler=cmd_demo, json=False)

    # Listed for --help only: main() hands `skills ...` to the skills command before parsing.
    sub.add_parser("skills", help="skills sync|check|manifest|links (see `skills --help`)")

    p = sub.add_parser("mcp", help="run the MCP server over stdio (same as automl-setup-mcp)")
    p.set_defaults(handler=None)
    return parser


def _dump(payload: BaseModel | dict[str, Any]) -> str:
    if isinstance(payload, BaseModel):
        return payload.model_dump_json(indent=2)
    return json.dumps(payload, indent=2, default=str)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["skills"]:
        from mcp_server.skills.cli import cli_main

        return cli_main(argv[1:])
    parser = build_parser()
    _Parser.json_errors = "--json" in argv
    args = parser.parse_args(argv)
    if args.command == "mcp":
        from mcp_server.faces.server import main as serve

        return serve()
    as_json = getattr(args, "json", False)
    try:
        return _run(args, as_json)
    except BrokenPipeError:  # output piped into `head` and the like: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.OK)


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
        outcome: Outcome = args.handler(args)
    except SetupError as exc:
        if as_json:
            print(_dump(_error_payload(exc)))
        print(f"error: {exc.full_text()}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
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
