"""What every command-line area module shares: the outcome of a command, how an operation's
request is built from the flags of the same name and run, and the common flags."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mcp_server.faces import messages
from mcp_server.requests import DEFAULT_BRANCH
from mcp_server.source.profile import EngineProfile, load_profile

Subparsers = Any  # argparse's _SubParsersAction, private in typeshed


class Outcome:
    """What a command produced: a model for --json, lines for people, an exit code."""

    def __init__(self, payload: BaseModel | dict[str, Any], text: str, code: int = 0) -> None:
        self.payload, self.text, self.code = payload, text, code


def profile_from_flags(args: argparse.Namespace) -> EngineProfile:
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


def request_fields(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The request's fields from the flags of the same name (the profile from its group)."""
    fields = {
        name: profile_from_flags(args) if name == "profile" else getattr(args, name)
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


def add_operation(
    sub: Subparsers, name: str, text: str, *, aliases: tuple[str, ...] = ()
) -> argparse.ArgumentParser:
    """The subcommand of operation `name` (`operations.OPERATIONS`), run by `run_operation`."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=text, aliases=list(aliases))
    p.set_defaults(handler=run_operation, operation=name)
    return p


def add_profile_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "engine profile (flags win over --profile, which wins over the default)"
    )
    group.add_argument("--profile", type=Path, help="TOML profile file")
    group.add_argument("--repository", help="git URL: https://, ssh://, git@host:path, file://")
    group.add_argument("--subdirectory", help="path of the engine package in the repository")
    group.add_argument("--distribution", help="distribution name the wheel must have")
    group.add_argument("--requirement", help="version specifier the wheel must satisfy")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


PYTHON_HELP = "interpreter or venv directory (default: $VIRTUAL_ENV)"
