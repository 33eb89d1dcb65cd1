"""What every command-line area module shares: the outcome of a command, how an operation's
subcommand is made from its row and its request built from the flags of the same name and run,
and the parser class of every command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from mcp_server.errors import InvalidInput
from mcp_server.faces.cli.flags import LazySubParsers, add_flags
from mcp_server.faces.registry import ALWAYS, COMMON_CODES, ExitCodes, Row, row
from mcp_server.faces.registry.fields import build_request
from mcp_server.faces.registry.row import Flag
from mcp_server.redact import carries_secret
from mcp_server.requests import DEFAULT_BRANCH
from mcp_server.source.config import effective_profile, project_path, project_stall_timeout
from mcp_server.source.profile import EngineProfile

Subparsers = Any  # argparse's _SubParsersAction, private in typeshed


class Outcome:
    """What a command produced: a model for --json, lines for people, an exit code."""

    def __init__(self, payload: BaseModel | dict[str, Any], text: str, code: int = 0) -> None:
        self.payload, self.text, self.code = payload, text, code


def profile_from_flags(args: argparse.Namespace) -> EngineProfile:
    """The profile of the flags, over AUTOML_SETUP_PROFILE or the working directory's project
    file (source/config.py)."""
    profile = _profile_from_flags(args)
    if args.repository is not None and carries_secret(profile.repository.with_credentials):
        # automl-setup hands it to git as a header, never on a command line; but its own
        # command line, this one, was readable by every user of the machine while it ran.
        print(
            "note: the credential in --repository was visible to other users of this machine "
            "(ps, /proc/<pid>/cmdline) while this command ran; keep it in a credential helper "
            "instead (`git config --global credential.helper store`, or `gh auth setup-git`) "
            "and pass the URL without it",
            file=sys.stderr,
        )
    return profile


def _profile_from_flags(args: argparse.Namespace) -> EngineProfile:
    return effective_profile(
        Path.cwd(),
        args.profile,
        repository=args.repository,
        subdirectory=args.subdirectory,
        distribution=args.distribution,
        requirement=args.requirement,
    )


def project_defaults(fields: dict[str, Any], *, workspace_needed: bool) -> dict[str, Any]:
    """`fields` with a python and workspace not given taken from the project file (found from
    the working directory); a needed workspace that neither names is refused. Every command
    with these flags takes them this way, operation or not."""
    fields = dict(fields)
    if "stall_timeout" in fields:
        fields["stall_timeout"] = project_stall_timeout(Path.cwd(), fields["stall_timeout"])
    if "python" in fields:
        fields["python"] = project_path(Path.cwd(), fields["python"], "python")
    if "workspace" in fields and workspace_needed:
        fields["workspace"] = project_path(Path.cwd(), fields["workspace"], "workspace")
        if fields["workspace"] is None:
            raise InvalidInput(
                "validate",
                "no --workspace given, and no project file names one",
                "pass --workspace DIR, or set workspace in the project file "
                "(`automl-setup config show` shows what is found)",
            )
    return fields


def request_fields(
    args: argparse.Namespace, model: type[BaseModel], flags: Mapping[str, Flag] | None = None
) -> dict[str, Any]:
    """The request's fields from the flags of the same name (the profile from its group; the
    python and workspace the project file names when the flag is not given; a flag given
    again, the values after its first in the field its `more` names)."""
    more = {name: flag.more for name, flag in (flags or {}).items() if flag.more}
    fields: dict[str, Any] = {
        name: profile_from_flags(args) if name == "profile" else getattr(args, name)
        for name in model.model_fields
        if name not in more.values()
    }
    for name, rest in more.items():
        given = fields[name] or []
        fields[name], fields[rest] = (given[0] if given else None), tuple(given[1:])
    needed = "workspace" in fields and (
        model.model_fields["workspace"].is_required() or bool(fields.get("experiment_id"))
    )
    fields = project_defaults(fields, workspace_needed=needed)
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
    fields = request_fields(args, operation.request, operation.flags)
    request = build_request(operation.request, fields)
    if operation.reports_progress:  # install, resolve, launch, ...
        from mcp_server.environment.transaction import STEPS  # the install's: ~0.1 s
        from mcp_server.faces.cli.progress import CliProgress

        progress = CliProgress(
            enabled=not args.json and not getattr(args, "detach", False),
            steps=operation.steps or STEPS,
        )
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
    (tests/faces/test_cli_help.py requires them of every subcommand)."""
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


Handler = Callable[[argparse.Namespace], Outcome]


def add_operation(
    sub: Subparsers, op: Row[Any, Any], handler: Handler = run_operation
) -> argparse.ArgumentParser:
    """The subcommand of operation `op`: its row gives the help (summary, paragraph, example and
    every exit code it can return) and its flags (made from the request when the command is
    parsed: `flags.LazySubParsers`); `run_operation` runs it, or the command line's own
    `handler` (`logs --follow`). A command of words ("slurm submit") is added as its last word
    under `sub`."""
    name = op.command.split()[-1]
    p = _parser(sub, name, op.summary, op.description, None, (), op.aliases)
    p.set_defaults(handler=handler)
    p.set_defaults(operation=op.command)
    assert isinstance(p, Parser)
    p.pending = lambda parser: _operation_flags(parser, op)
    return p


def _operation_flags(parser: argparse.ArgumentParser, op: Row[Any, Any]) -> None:
    add_flags(parser, op)
    parser.epilog = help_epilog(op.example, op.exit_codes())


class Parser(argparse.ArgumentParser):
    """The command line's parsers: usage errors as one JSON document on stdout too, when
    --json was asked for; flags added when the command is parsed or its help is asked for
    (`pending`: an operation's flags and epilog from its row, made from its request)."""

    json_errors = False
    pending: Callable[[argparse.ArgumentParser], None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", LazySubParsers)

    def populate(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending(self)

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            cause = {"step": "parse arguments", "cause": message, "exit_code": 2}
            print(json.dumps({"error": {**cause, "remedy": f"see {self.prog} --help"}}))
        super().error(message)

    def format_help(self) -> str:
        self.populate()
        return super().format_help()
