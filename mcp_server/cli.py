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

from mcp_server import __version__, messages
from mcp_server.errors import ExitCode, SetupError
from mcp_server.profile import EngineProfile, load_profile
from mcp_server.redact import redact_text

Handler = Callable[[argparse.Namespace], "Outcome"]


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
    from mcp_server.install import STEPS

    def emit(step: str, message: str) -> None:
        if not enabled:
            return
        where = f"{STEPS.index(step) + 1}/{len(STEPS)} " if step in STEPS else ""
        print(f"[{where}{step}] {message}", file=sys.stderr, flush=True)

    return emit


# --------------------------------------------------------------------------------------------
# Commands


def cmd_resolve(args: argparse.Namespace) -> Outcome:
    from mcp_server.gitsource import resolve_branch

    profile = _profile(args)
    res = resolve_branch(profile.repository, args.branch)
    payload = {"repository": res.repository, "ref": res.ref, "commit": res.commit}
    return Outcome(payload, messages.resolution_text(res.ref, res.commit, res.repository))


def cmd_install(args: argparse.Namespace) -> Outcome:
    from mcp_server.install import InstallRequest, install_engine

    branch = args.branch if args.branch is not None or args.commit is not None else "main"
    request = InstallRequest(
        profile=_profile(args),
        python=args.python,
        branch=branch,
        commit=args.commit,
        create_env=args.create_env,
        extras=args.extra or [],
    )
    result = install_engine(request, _progress_printer(not args.json))
    return Outcome(result, messages.install_text(result))


def cmd_verify(args: argparse.Namespace) -> Outcome:
    from mcp_server.diagnose import diagnose
    from mcp_server.install import verify

    profile = _profile(args)
    report = verify(args.python, profile)
    text = messages.verify_text(report)
    if report.exit_code == ExitCode.NOTHING_INSTALLED:
        text += "\n\n" + messages.diagnosis_text(diagnose(args.python, profile))
    return Outcome(report, text, report.exit_code)


def cmd_diagnose(args: argparse.Namespace) -> Outcome:
    from mcp_server.diagnose import diagnose

    result = diagnose(args.python, _profile(args))
    return Outcome(result, messages.diagnosis_text(result), 0 if result.healthy else 1)


def cmd_history(args: argparse.Namespace) -> Outcome:
    from mcp_server.install import history

    entries, torn, where = history(args.python)
    payload = {
        "environment": where,
        "entries": [e.model_dump() for e in entries],
        "torn_line": torn,
    }
    return Outcome(payload, messages.history_text(entries, torn, where))


def cmd_repair(args: argparse.Namespace) -> Outcome:
    from mcp_server.install import repair_environment

    message = repair_environment(args.python)
    return Outcome({"message": message}, message)


def cmd_launch(args: argparse.Namespace) -> Outcome:
    from mcp_server.experiments import launch_experiment

    started = launch_experiment(args.manifest, args.workspace, args.python, args.detach)
    return Outcome(started, messages.started_text(started), started.exit_code or 0)


def cmd_resume(args: argparse.Namespace) -> Outcome:
    from mcp_server.experiments import resume_experiment

    started = resume_experiment(
        args.experiment_id, args.workspace, args.manifest, args.python, args.detach
    )
    return Outcome(started, messages.started_text(started), started.exit_code or 0)


def cmd_status(args: argparse.Namespace) -> Outcome:
    from mcp_server.experiments import experiment_status, format_status

    status = experiment_status(args.experiment_id, args.workspace)
    return Outcome(status, format_status(status))


def cmd_experiments(args: argparse.Namespace) -> Outcome:
    from mcp_server.experiments import list_experiments

    listing = list_experiments(args.workspace)
    return Outcome(listing, messages.listing_text(listing), 1 if listing.unreadable else 0)


def cmd_demo(args: argparse.Namespace) -> Outcome:
    from mcp_server.demo import run_demo

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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="automl-setup",
        description="Install an AutoML core engine from source, verified and recorded.",
    )
    parser.add_argument("--version", action="version", version=f"automl-setup {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("resolve", help="resolve refs/heads/BRANCH to a full commit")
    p.add_argument("--branch", default="main", help="branch name (default: main)")
    _add_profile_flags(p)
    _add_json(p)
    p.set_defaults(handler=cmd_resolve)

    p = sub.add_parser("install", help="install the engine from a branch or commit")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--branch", help="branch to resolve and install (default: main)")
    which.add_argument("--commit", help="full commit id to install")
    p.add_argument("--python", help="interpreter or venv directory (default: $VIRTUAL_ENV)")
    p.add_argument("--create-env", action="store_true", help="create the venv if it is missing")
    p.add_argument("--extra", action="append", metavar="NAME", help="engine extra (repeatable)")
    _add_profile_flags(p)
    _add_json(p)
    p.set_defaults(handler=cmd_install)

    for name, handler, text in (
        ("verify", cmd_verify, "check the installed engine against its record"),
        ("diagnose", cmd_diagnose, "explain what is (not) installed and how to fix it"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--python", help="interpreter or venv directory (default: $VIRTUAL_ENV)")
        _add_profile_flags(p)
        _add_json(p)
        p.set_defaults(handler=handler)

    for name, handler, text in (
        ("history", cmd_history, "list every install into an environment"),
        ("repair", cmd_repair, "roll back an interrupted install"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--python", help="interpreter or venv directory (default: $VIRTUAL_ENV)")
        _add_json(p)
        p.set_defaults(handler=handler)
    p = sub.add_parser("launch", help="start a new experiment bound to the verified engine")
    p.add_argument("--manifest", required=True, help="experiment manifest (YAML or JSON)")
    p.add_argument("--workspace", required=True, help="directory of experiments")
    p.add_argument("--python", help="environment of the engine (default: $VIRTUAL_ENV)")
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    _add_json(p)
    p.set_defaults(handler=cmd_launch)

    p = sub.add_parser("resume", help="resume an experiment on exactly its bound engine")
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", required=True, help="directory of experiments")
    p.add_argument("--manifest", required=True, help="the manifest the experiment started with")
    p.add_argument("--python", help="environment of the engine (default: $VIRTUAL_ENV)")
    p.add_argument("--detach", action="store_true", help="return at once with pid and log")
    _add_json(p)
    p.set_defaults(handler=cmd_resume)

    p = sub.add_parser("status", help="state, trials, best and bound engine of an experiment")
    p.add_argument("--experiment-id", required=True)
    p.add_argument("--workspace", required=True)
    _add_json(p)
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("demo", help="the whole story on the embedded reference engine")
    p.add_argument("--workdir", type=Path, help="where to put everything (default: a temp dir)")
    p.set_defaults(handler=cmd_demo, json=False)

    # Listed for --help only: main() hands `skills ...` to the skills command before parsing.
    sub.add_parser("skills", help="skills sync|check|manifest|links (see `skills --help`)")

    p = sub.add_parser("mcp", help="run the MCP server over stdio (same as automl-setup-mcp)")
    p.set_defaults(handler=None)

    p = sub.add_parser("experiments", help="list the experiments of a workspace")
    p.add_argument("--workspace", required=True)
    _add_json(p)
    p.set_defaults(handler=cmd_experiments)
    return parser


def _dump(payload: BaseModel | dict[str, Any]) -> str:
    if isinstance(payload, BaseModel):
        return payload.model_dump_json(indent=2)
    return json.dumps(payload, indent=2, default=str)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["skills"]:
        from mcp_server.skills import cli_main

        return cli_main(argv[1:])
    parser = build_parser()
    _Parser.json_errors = "--json" in argv
    args = parser.parse_args(argv)
    if args.command == "mcp":
        from mcp_server.server import main as serve

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
