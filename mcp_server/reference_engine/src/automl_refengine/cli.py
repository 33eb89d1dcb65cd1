"""Command line of the reference engine.

    automl-refengine plan   --manifest M --workspace W [--json]
    automl-refengine run    --manifest M --workspace W --approve [--max-allocations CAP] [--json]
    automl-refengine resume --manifest M --workspace W --approve [--max-allocations CAP] [--json]
    automl-refengine status --experiment-id ID [--experiment-id ID ...] --workspace W [--json]
    automl-refengine logs   --experiment-id ID --workspace W [--trial N] [--json]
    automl-refengine cancel --experiment-id ID --workspace W --approve [--json]

Exit codes: 0 ok; 1 refused, failed or cancelled; 2 invalid input (allocations exhausted
included); 130/143/138 the controller stopped on SIGINT/SIGTERM/SIGUSR1 with its state
saved; 141 the reader of stdout went away (`| head`), quietly. With --json, stdout carries
exactly one JSON document (on errors: {"error", "exit_code"}). --max-allocations: see
allocation.py (SLURM controller jobs). `status` of several ids answers for each in one process:
{"experiments": [one entry per id, in order: its status, or {"experiment_id", "error",
"exit_code"}]}, exit 0; a caller reads each entry as the answer `status` of that id alone
would give.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from automl_refengine import __version__
from automl_refengine.allocation import CAP_VARIABLE, current_allocation
from automl_refengine.errors import EngineError, ExitCode, InvalidInput, Refused
from automl_refengine.layout import ExperimentPaths
from automl_refengine.manifest import check_safe_id, load_manifest
from automl_refengine.report import read_ledger, status_report, trial_logs
from automl_refengine.runner import (
    RunResult,
    cancel_experiment,
    plan,
    resume_experiment,
    run_experiment,
)

MUTATIONS = ("run", "resume", "cancel")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="automl-refengine", description="Reference AutoML engine (embedded in automl-setup)."
    )
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True)
    helps = {
        "plan": "validate a manifest and print the trials `run` would launch; writes nothing",
        "run": "start a new experiment",
        "resume": "continue an interrupted experiment with the same manifest",
        "status": "show an experiment's state, trial counts and best trial",
        "logs": "show the ledger, or one trial's stdout and stderr",
        "cancel": "cancel an experiment (signals its controller if one is running)",
    }
    for name, text in helps.items():
        sub = commands.add_parser(name, help=text, description=text)
        if name in ("plan", "run", "resume"):
            sub.add_argument("--manifest", type=Path, required=True, help="YAML or JSON manifest")
        elif name == "status":
            sub.add_argument("--experiment-id", required=True, action="append")
        else:
            sub.add_argument("--experiment-id", required=True)
        sub.add_argument("--workspace", type=Path, required=True, help="directory of experiments")
        if name in MUTATIONS:
            sub.add_argument("--approve", action="store_true", help="allow this command to write")
        if name in ("run", "resume"):
            sub.add_argument(
                "--max-allocations",
                metavar="CAP",
                default=os.environ.get(CAP_VARIABLE),
                help=f"SLURM allocations in all, the first included (default: ${CAP_VARIABLE})",
            )
        if name == "logs":
            sub.add_argument("--trial", type=int, metavar="N", help="trial index (from 0)")
        sub.add_argument("--json", action="store_true", help="print one JSON document")
    return parser


def _format_params(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def _format_status(status: dict[str, Any]) -> str:
    lines = [
        f"experiment  {status['experiment_id']}  ({status['experiment_dir']})",
        f"state       {status['state']}"
        + (f" ({status['stop_reason']})" if status["stop_reason"] else ""),
        f"trials      {status['trials_done']} done: {status['trials_succeeded']} succeeded, "
        f"{status['trials_failed']} failed (planned {status['planned_trials']})",
        f"elapsed     {status['elapsed_s']:.1f} s of {status['total_timeout_s']:g} s "
        f"over {status['sessions']} session(s)",
    ]
    best = status["best"]
    if best:
        lines.append(
            f"best        trial {best['index']:05d}: {best['metric']}={best['value']:.6g} "
            f"({best['direction']}) {_format_params(best['params'])}"
        )
    else:
        lines.append("best        none yet")
    if status["controller_pid"] is not None:
        lines.append(f"controller  pid {status['controller_pid']}")
    if status["cancel_requested"]:
        lines.append("cancel      requested")
    return "\n".join(lines)


def _cmd_plan(args: argparse.Namespace) -> tuple[int, Any, str]:
    manifest = load_manifest(args.manifest)
    search = manifest.search
    paths = ExperimentPaths(args.workspace, search.experiment_id)
    trials = plan(manifest, args.workspace)
    refuse = paths.holds_state()
    data = {
        "experiment_id": search.experiment_id,
        "experiment_dir": str(paths.root),
        "run_would_refuse": refuse,
        "algorithm": search.algorithm,
        "seed": search.seed,
        "objective": search.objective.model_dump(),
        "budget": search.budget.model_dump(),
        "trials": [asdict(t) for t in trials],
    }
    budget = search.budget
    lines = [
        f"experiment {search.experiment_id} in {paths.root}"
        + (" (already holds an experiment: run would refuse, use resume)" if refuse else ""),
        f"algorithm {search.algorithm}, seed {search.seed}, "
        f"{search.objective.direction} {search.objective.metric}",
        f"budget {budget.max_trials} trials, {budget.trial_timeout_s:g} s per trial, "
        f"{budget.total_timeout_s:g} s in total; {len(trials)} trials planned",
    ]
    lines += [f"trial {t.index:05d} {_format_params(t.params)}" for t in trials]
    if trials:
        lines.append(f"argv of trial 00000: {shlex.join(trials[0].argv)}")
    lines.append("nothing was written; `run ... --approve` launches these trials")
    return ExitCode.OK, data, "\n".join(lines)


def _finish_run(args: argparse.Namespace, result: RunResult) -> tuple[int, Any, str]:
    paths = ExperimentPaths(args.workspace, result.state.experiment_id)
    status = status_report(paths, result.state)
    data = {"message": result.message, "status": status}
    return result.exit_code, data, f"{result.message}\n{_format_status(status)}"


def _progress(args: argparse.Namespace) -> Callable[[str], None]:
    if args.json:
        return lambda _line: None
    return lambda line: print(line, flush=True)


def _cmd_run(args: argparse.Namespace) -> tuple[int, Any, str]:
    manifest = load_manifest(args.manifest)
    allocation = current_allocation(args.max_allocations)
    result = run_experiment(manifest, args.workspace, _progress(args), allocation)
    return _finish_run(args, result)


def _cmd_resume(args: argparse.Namespace) -> tuple[int, Any, str]:
    manifest = load_manifest(args.manifest)
    allocation = current_allocation(args.max_allocations)
    result = resume_experiment(manifest, args.workspace, _progress(args), allocation)
    return _finish_run(args, result)


def _paths(args: argparse.Namespace, experiment_id: str | None = None) -> ExperimentPaths:
    experiment_id = experiment_id or args.experiment_id
    try:
        check_safe_id(experiment_id)
    except ValueError as exc:
        raise InvalidInput(f"--experiment-id {experiment_id!r}: {exc}") from None
    return ExperimentPaths(args.workspace, experiment_id)


def _cmd_status(args: argparse.Namespace) -> tuple[int, Any, str]:
    ids: list[str] = args.experiment_id
    if len(ids) == 1:
        status = status_report(_paths(args, ids[0]))
        return ExitCode.OK, status, _format_status(status)
    entries: list[dict[str, Any]] = []
    texts: list[str] = []
    for experiment_id in ids:
        try:
            status = status_report(_paths(args, experiment_id))
        except (EngineError, OSError) as exc:  # one unreadable experiment hides no other
            code, message = _failure(exc)
            status = {"experiment_id": experiment_id, "error": message, "exit_code": int(code)}
            texts.append(f"experiment  {experiment_id}: {message}")
        else:
            texts.append(_format_status(status))
        entries.append(status)
    return ExitCode.OK, {"experiments": entries}, "\n\n".join(texts)


def _cmd_logs(args: argparse.Namespace) -> tuple[int, Any, str]:
    paths = _paths(args)
    if args.trial is not None:
        if args.trial < 0:
            raise InvalidInput("--trial must be 0 or more")
        logs = trial_logs(paths, args.trial)
        parts = [f"== {logs.trial_dir}/stdout.log ==", logs.stdout, "== stderr.log ==", logs.stderr]
        return ExitCode.OK, asdict(logs), "\n".join(part.rstrip("\n") for part in parts)
    events = [event.model_dump(mode="json") for event in read_ledger(paths)]
    return ExitCode.OK, {"events": events}, "\n".join(_format_event(e) for e in events)


def _format_event(event: dict[str, Any]) -> str:
    hidden = ("seq", "time", "event", "session_elapsed_s")
    fields = " ".join(
        f"{key}={json.dumps(value)}"
        for key, value in event.items()
        if key not in hidden and value is not None
    )
    return f"{event['seq']:>5} {event['time']} {event['event']} {fields}".rstrip()


def _cmd_cancel(args: argparse.Namespace) -> tuple[int, Any, str]:
    message = cancel_experiment(_paths(args))
    return ExitCode.OK, {"message": message}, message


COMMANDS: dict[str, Callable[[argparse.Namespace], tuple[int, Any, str]]] = {
    "plan": _cmd_plan,
    "run": _cmd_run,
    "resume": _cmd_resume,
    "status": _cmd_status,
    "logs": _cmd_logs,
    "cancel": _cmd_cancel,
}


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # output piped into `head` and the like, --help included
        # Quiet, with the status of a process SIGPIPE ended; stdout made harmless for the
        # interpreter's final flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.SIGPIPE)


def _failure(exc: EngineError | OSError) -> tuple[int, str]:
    if isinstance(exc, EngineError):
        return exc.exit_code, str(exc)
    return ExitCode.REFUSED, f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    # Trials run with their own directory as working directory, so every path they are given
    # (placeholders expand from the workspace) must be absolute.
    args.workspace = args.workspace.absolute()
    try:
        if args.command in MUTATIONS and not args.approve:
            raise Refused(
                f"`{args.command}` writes under {args.workspace}; nothing was done. Review "
                f"`plan`/`status` first, then repeat the command with --approve"
            )
        code, data, text = COMMANDS[args.command](args)
    except BrokenPipeError:  # the reader is gone: main() ends quietly
        raise
    except (EngineError, OSError) as exc:
        code, message = _failure(exc)
    except KeyboardInterrupt:  # Ctrl-C before the controller installed its handler
        code, message = ExitCode.SIGINT, "interrupted before the controller started"
    else:
        print(json.dumps(data, indent=2, sort_keys=True) if args.json else text)
        return int(code)
    print(f"automl-refengine {args.command}: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps({"error": message, "exit_code": int(code)}, indent=2, sort_keys=True))
    return int(code)
