"""What every command-line area module shares: the outcome of a command, how an operation's
request is built from the flags of the same name and run, and the common flags."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from mcp_server.errors import InvalidInput
from mcp_server.faces.cli.progress import CliProgress
from mcp_server.faces.registry import ALWAYS, COMMON_CODES, ExitCodes, row
from mcp_server.requests import DEFAULT_BRANCH
from mcp_server.source.config import effective_profile, project_path
from mcp_server.source.profile import EngineProfile

Subparsers = Any  # argparse's _SubParsersAction, private in typeshed


class Outcome:
    """What a command produced: a model for --json, lines for people, an exit code."""

    def __init__(self, payload: BaseModel | dict[str, Any], text: str, code: int = 0) -> None:
        self.payload, self.text, self.code = payload, text, code


def profile_from_flags(args: argparse.Namespace) -> EngineProfile:
    """The profile of the flags, over AUTOML_SETUP_PROFILE or the working directory's project
    file (source/config.py)."""
    return effective_profile(
        Path.cwd(),
        args.profile,
        repository=args.repository,
        subdirectory=args.subdirectory,
        distribution=args.distribution,
        requirement=args.requirement,
    )


def request_fields(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The request's fields from the flags of the same name (the profile from its group; the
    python and workspace the project file names when the flag is not given)."""
    fields = {
        name: profile_from_flags(args) if name == "profile" else getattr(args, name)
        for name in model.model_fields
    }
    if "python" in fields:
        fields["python"] = project_path(Path.cwd(), fields["python"], "python")
    if "workspace" in fields and (
        model.model_fields["workspace"].is_required() or fields.get("experiment_id")
    ):
        fields["workspace"] = project_path(Path.cwd(), fields["workspace"], "workspace")
        if fields["workspace"] is None:
            raise InvalidInput(
                "validate",
                "no --workspace given, and no project file names one",
                "pass --workspace DIR, or set workspace in the project file "
                "(`automl-setup config show` shows what is found)",
            )
    no_source = (fields.get(key) is None for key in ("branch", "commit", "wheel"))
    if args.operation == "install" and all(no_source):
        fields["branch"] = DEFAULT_BRANCH  # a person at the command line; agents are asked
        if not args.json:
            print(f"no --branch given: installing {DEFAULT_BRANCH}, the default", file=sys.stderr)
    return fields


def run_operation(args: argparse.Namespace) -> Outcome:
    """Build the operation's request from the flags, run it, render it (its row's renderer and
    exit-code rule)."""
    operation = row(args.operation)
    request = operation.request(**request_fields(args, operation.request))
    if "progress" in inspect.signature(operation.run).parameters:  # install, launch, resume
        progress = CliProgress(enabled=not args.json and not getattr(args, "detach", False))
        try:
            result = operation.run(request, progress)
        finally:
            progress.close()
    else:
        result = operation.run(request)
    return Outcome(result, operation.render(result), operation.exit_code(result))


class HelpFormatter(argparse.HelpFormatter):
    """The description wrapped as paragraphs; indented lines (the epilog's example and exit
    codes) kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        for block in text.split("\n\n"):
            if block.startswith(" ") or "\n " in block:
                out.append("\n".join(indent + line for line in block.splitlines()))
            else:
                out.append(super()._fill_text(block, width, indent))
        return "\n\n".join(out)


def help_epilog(example: str, codes: ExitCodes) -> str:
    lines = ["example:", *(f"  {line}" for line in example.splitlines()), "", "exit codes:"]
    lines += [f"  {code!s:<3}  {meaning}" for code, meaning in codes]
    return "\n".join(lines)


def add_command(
    sub: Subparsers,
    name: str,
    text: str,
    *,
    description: str | None = None,
    example: str | None = None,
    codes: ExitCodes = (),
    aliases: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    """A subcommand that is not an operation, whose --help has a paragraph (`description`), an
    example and the exit codes: the common ones, `codes`, those of an interruption
    (tests/test_cli_help.py requires them of every subcommand)."""
    every = (*COMMON_CODES, *codes, *ALWAYS)
    return _parser(sub, name, text, description or text, example, every, aliases)


def _parser(
    sub: Subparsers,
    name: str,
    text: str,
    description: str,
    example: str | None,
    codes: ExitCodes,
    aliases: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help=text,
        aliases=list(aliases),
        description=description,
        epilog=help_epilog(example, codes) if example else None,
        formatter_class=HelpFormatter,
    )
    return p


def add_operation(
    sub: Subparsers, command: str, aliases: tuple[str, ...] = ()
) -> argparse.ArgumentParser:
    """The subcommand of operation `command` (its row in `faces/registry/` gives the help:
    summary, paragraph, example and every exit code it can return), run by `run_operation`.
    A command of words ("slurm submit") is added as its last word under `sub`. The exit codes
    depend on the request's fields, so the epilog is written when help is asked for
    (`Parser.format_help`): building the parser imports no request of another area."""
    op = row(command)
    name = command.split()[-1]
    p = _parser(sub, name, op.summary, op.description, None, (), aliases)
    p.set_defaults(handler=run_operation, operation=command)
    p.operation = command  # type: ignore[attr-defined]
    return p


class Parser(argparse.ArgumentParser):
    """The command line's parsers: usage errors as one JSON document on stdout too, when
    --json was asked for; an operation's epilog (example, exit codes) from its row."""

    json_errors = False
    operation: str | None = None

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            cause = {"step": "parse arguments", "cause": message, "exit_code": 2}
            print(json.dumps({"error": {**cause, "remedy": f"see {self.prog} --help"}}))
        super().error(message)

    def format_help(self) -> str:
        if self.operation is not None and self.epilog is None:
            op = row(self.operation)
            self.epilog = help_epilog(op.example, op.exit_codes())
        return super().format_help()


def add_profile_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "engine profile (flags > --profile FILE > $AUTOML_SETUP_PROFILE > the project file "
        "[tool.automl-setup] or automl-setup.toml > the built-in default)"
    )
    group.add_argument("--profile", type=Path, help="TOML profile file")
    group.add_argument("--repository", help="git URL: https://, ssh://, git@host:path, file://")
    group.add_argument("--subdirectory", help="path of the engine package in the repository")
    group.add_argument("--distribution", help="distribution name the wheel must have")
    group.add_argument("--requirement", help="version specifier the wheel must satisfy")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


PYTHON_HELP = "interpreter or venv directory (default: the project file's, else $VIRTUAL_ENV)"
WORKSPACE_HELP = "directory of experiments (default: the project file's workspace)"
