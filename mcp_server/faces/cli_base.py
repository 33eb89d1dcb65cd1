"""What every command-line area module shares: the outcome of a command, how an operation's
request is built from the flags of the same name and run, and the common flags."""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcp_server.errors import ExitCode, InvalidInput
from mcp_server.faces import messages
from mcp_server.faces.cli_progress import CliProgress
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
    from mcp_server.operations import OPERATIONS

    (operation,) = (op for op in OPERATIONS if op.command == args.operation)
    request = operation.request(**request_fields(args, operation.request))
    if "progress" in inspect.signature(operation.run).parameters:  # install, launch, resume
        progress = CliProgress(enabled=not args.json and not getattr(args, "detach", False))
        try:
            result = operation.run(request, progress)
        finally:
            progress.close()
    else:
        result = operation.run(request)
    text = messages.render(args.operation, result)
    return Outcome(result, text, messages.exit_code(args.operation, result))


# What every command's --help lists under "exit codes" (a command adds its own).
ExitCodes = tuple[tuple[int | str, str], ...]
EXIT_CODES: ExitCodes = (
    (ExitCode.OK, "ok"),
    (ExitCode.REFUSED, "refused, or a step failed (the message names the step and the remedy)"),
    (ExitCode.INVALID_INPUT, "invalid input"),
)
NOTHING_INSTALLED: ExitCodes = ((ExitCode.NOTHING_INSTALLED, "no engine in the environment"),)
# 128 + the signal, as a shell reports a process the signal ended.
INTERRUPTED, PIPE_CLOSED = 130, 141
ALWAYS: ExitCodes = (
    (INTERRUPTED, "interrupted (Ctrl-C)"),
    (PIPE_CLOSED, "the output pipe was closed (`| head`): quietly"),
)


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
    lines += [f"  {code!s:<3}  {meaning}" for code, meaning in (*EXIT_CODES, *codes, *ALWAYS)]
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
    """A subcommand whose --help has a paragraph (`description`), an example and the exit
    codes (tests/test_cli_help.py requires them of every subcommand)."""
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help=text,
        aliases=list(aliases),
        description=description or text,
        epilog=help_epilog(example, codes) if example else None,
        formatter_class=HelpFormatter,
    )
    return p


def add_operation(sub: Subparsers, name: str, text: str, **help_: Any) -> argparse.ArgumentParser:
    """The subcommand of operation `name` (`operations.OPERATIONS`), run by `run_operation`;
    `help_` as for `add_command`."""
    p = add_command(sub, name, text, **help_)
    p.set_defaults(handler=run_operation, operation=name)
    return p


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
