"""The rows of the experiment operations: launch, resume, status, list, stop, logs, report,
track."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_server.faces.registry.row import (
    LOCAL_READ,
    STALL_FLAG,
    ExitCodes,
    Flag,
    Hints,
    Operation,
    Row,
    Tool,
    all_readable,
    engine_exit_code,
    reporting,
    stopped,
)
from mcp_server.requests import (
    LaunchRequest,
    ListQuery,
    LogsQuery,
    ReportQuery,
    ResumeRequest,
    StatusQuery,
    StopRequest,
    TrackRequest,
)

ENGINE_EXIT: ExitCodes = (
    ("N", "in the foreground: the engine's own exit code (143: stopped by SIGTERM, its state "
     "saved; resume it)"),
)  # fmt: skip
# A client is never sent thousands of statuses at once: the tool pages, the command line need not.
MCP_PAGE_SIZE = 100
DETACHED = "an MCP call always returns at once (detached); the command line can wait"


if TYPE_CHECKING:
    from mcp_server.experiments.logs import LogTail
    from mcp_server.experiments.started import StartedEngine
    from mcp_server.experiments.status import ExperimentListing, ExperimentStatus
    from mcp_server.experiments.stop import StopResult
    from mcp_server.report.make import ReportResult
    from mcp_server.tracking.track import TrackResult


def _launch() -> Operation[LaunchRequest, StartedEngine]:
    from mcp_server.experiments.launch import launch_experiment
    from mcp_server.experiments.started import StartedEngine
    from mcp_server.faces.render.experiments import started_text

    return reporting(launch_experiment, StartedEngine, started_text)


def _resume() -> Operation[ResumeRequest, StartedEngine]:
    from mcp_server.experiments.resume import resume_experiment
    from mcp_server.experiments.started import StartedEngine
    from mcp_server.faces.render.experiments import started_text

    return reporting(resume_experiment, StartedEngine, started_text)


def _status() -> Operation[StatusQuery, ExperimentStatus]:
    from mcp_server.experiments.status import ExperimentStatus, experiment_status
    from mcp_server.faces.render.experiments import status_text

    return Operation(experiment_status, ExperimentStatus, status_text)


def _list() -> Operation[ListQuery, ExperimentListing]:
    from mcp_server.experiments.status import ExperimentListing, list_experiments
    from mcp_server.faces.render.experiments import listing_text

    return Operation(list_experiments, ExperimentListing, listing_text)


def _stop() -> Operation[StopRequest, StopResult]:
    from mcp_server.experiments.stop import StopResult, stop_experiment
    from mcp_server.faces.render.experiments import stop_text

    return Operation(stop_experiment, StopResult, stop_text)


def _logs() -> Operation[LogsQuery, LogTail]:
    from mcp_server.experiments.logs import LogTail, experiment_log
    from mcp_server.faces.render.experiments import logs_text

    return Operation(experiment_log, LogTail, logs_text)


def _report() -> Operation[ReportQuery, ReportResult]:
    from mcp_server.faces.render.report import report_text
    from mcp_server.report.make import ReportResult, make_report

    return Operation(make_report, ReportResult, report_text)


def _track() -> Operation[TrackRequest, TrackResult]:
    from mcp_server.faces.render.experiments import track_text
    from mcp_server.tracking.track import STEPS, TrackResult, track_experiment

    return reporting(track_experiment, TrackResult, track_text, STEPS)


ROWS: tuple[Row[Any, Any], ...] = (
    Row(
        command="launch",
        tool="launch_experiment",
        operation=_launch,
        load_request=lambda: LaunchRequest,
        summary="start a new experiment bound to the verified engine",
        description="Verify the environment's engine against its record, have the engine check the "
        "manifest (plan), bind a new experiment to that exact build (binding.json) and run the "
        "engine on it, in the foreground with its progress, or detached.",
        example="automl-setup launch --manifest m.yaml --workspace runs --python .venv-train",
        title="Launch an experiment",
        hints=Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
        exit_rule=engine_exit_code,
        codes=ENGINE_EXIT,
        cli_only=frozenset({"detach"}),
        why=DETACHED,
        mcp=Tool(
            "Start a new experiment bound to the verified engine in `python`, detached. Returns "
            "at once with the engine's pid, log path and binding path; follow it with "
            "status_experiment.",
            fixed={"detach": True},
        ),
    ),
    Row(
        command="resume",
        tool="resume_experiment",
        operation=_resume,
        load_request=lambda: ResumeRequest,
        summary="resume an experiment on exactly its bound engine",
        description=(
            "Resume an interrupted experiment on exactly the engine build it is bound to: the "
            "manifest's hash, the environment's record and every identity field must match, or it "
            "refuses naming each difference and the commands that recreate the bound engine. It "
            "never installs anything."
        ),
        example="automl-setup resume --experiment-id ID --workspace runs --manifest m.yaml "
        "--python .venv-train",
        title="Resume an experiment on its bound engine",
        hints=Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
        exit_rule=engine_exit_code,
        codes=ENGINE_EXIT,
        cli_only=frozenset({"detach"}),
        why=DETACHED,
        mcp=Tool(
            "Resume the experiment with exactly this id on exactly the engine build it is bound "
            "to, detached. Any difference refuses with the field-level diff and the commands that "
            "recreate the bound engine in a separate environment; nothing is installed or "
            "upgraded.",
            fixed={"detach": True},
        ),
    ),
    Row(
        command="status",
        tool="status_experiment",
        operation=_status,
        load_request=lambda: StatusQuery,
        summary="state, trials, best and bound engine of an experiment",
        description=(
            "Show an experiment's state (never `running` while no engine holds its lock), the "
            "trials done of those planned, the trials table, the best trial, the bound engine, the "
            "last attempt and, when it was interrupted, the exact resume command. Reads the "
            "records only."
        ),
        example="automl-setup status --experiment-id ID --workspace runs",
        title="Experiment status",
        hints=LOCAL_READ,
        mcp=Tool(
            "State, trials done, best trial and bound engine of one experiment, read from its "
            "ledger.",
        ),
    ),
    Row(
        command="list",
        tool="list_experiments",
        operation=_list,
        load_request=lambda: ListQuery,
        summary="list the experiments of a workspace",
        description=(
            "List every experiment of a workspace (--workspace again for more) with its status (as "
            "`status` shows it), and every experiment folder that cannot be read, with why (exit "
            "code 1 when there is one). In id order; every one unless --page-size is given, then "
            "that many and the --cursor of the next page. --bound-commit, --identity-digest and "
            "--closure-member keep only the experiments bound to that build: which experiments ran "
            "on this engine commit?"
        ),
        example=(
            "automl-setup list --workspace runs --workspace ../team/runs --bound-commit 4217559e"
        ),
        title="List experiments",
        hints=LOCAL_READ,
        exit_rule=all_readable,
        aliases=("experiments",),
        flags={
            "workspace": Flag(
                more="workspaces",
                help="Directory that holds the experiments; given again, every one is listed "
                "(default: the project file's workspace)",
            ),
            "page_size": Flag(metavar="N"),
            "cursor": Flag(metavar="CURSOR"),
            "bound_commit": Flag(metavar="PREFIX"),
            "identity_digest": Flag(metavar="PREFIX"),
            "closure_member": Flag(metavar="NAME[==VERSION]"),
        },
        cli_only=frozenset({"page_size", "workspaces"}),
        why=f"an MCP reply is always one page of {MCP_PAGE_SIZE}, and a page is of one "
        "workspace: a tool call lists one workspace (call it once for each); the command line "
        "shows every experiment unless --page-size is given",
        mcp=Tool(
            "The experiments launched by automl-setup in the workspace, with their status, in "
            f"id order, {MCP_PAGE_SIZE} per call: pass next_cursor as cursor for the next page "
            "(null: the last one); total counts them all. bound_commit, identity_digest and "
            "closure_member keep only the experiments bound to that build (call once per "
            "workspace to ask several).",
            fixed={"page_size": MCP_PAGE_SIZE},
        ),
    ),
    Row(
        command="stop",
        tool="stop_experiment",
        operation=_stop,
        load_request=lambda: StopRequest,
        summary="stop an experiment's engine: SIGTERM, wait, report",
        description=(
            "Stop the engine automl-setup started for an experiment: SIGTERM, then wait up to the "
            "grace period for it to save its state and exit (with --kill, SIGKILL after it), and "
            "report what its ledger says; recorded in the attempts ledger. Exit code 1 when it "
            "still runs."
        ),
        example="automl-setup stop --experiment-id ID --workspace runs --grace 60",
        title="Stop an experiment's engine",
        hints=Hints(read_only=False, destructive=True, idempotent=False, open_world=False),
        exit_rule=stopped,
        flags={"grace": Flag(metavar="S")},
        mcp=Tool(
            "SIGTERM to the engine automl-setup started for this experiment (checked by pid and "
            "start time: a reused pid is never signalled), then wait up to `grace` seconds for it "
            "to save and exit, and report what its ledger says. resume_experiment continues it.",
        ),
    ),
    Row(
        command="logs",
        tool="logs_experiment",
        operation=_logs,
        load_request=lambda: LogsQuery,
        summary="the tail of an attempt's or a trial's log (64 KiB at most)",
        description=(
            "Print the tail of an attempt's engine log (the last attempt by default) or of one "
            "trial's log, at most 64 KiB; with --follow, keep printing as it grows until the "
            "engine exits."
        ),
        example="automl-setup logs --experiment-id ID --workspace runs --trial 3",
        title="Tail of an experiment's log",
        hints=LOCAL_READ,
        flags={"attempt": Flag(metavar="N"), "trial": Flag(metavar="N")},
        exclusive=(("attempt", "trial"),),
        cli_only=frozenset({"follow"}),
        why="an MCP call returns the tail once; the command line can keep printing the log",
        mcp=Tool(
            "The last 64 KiB of the engine output of one attempt (the last one by default) or of "
            "one trial, credentials masked: read it to see why something failed.",
        ),
    ),
    Row(
        command="report",
        tool="report_experiment",
        operation=_report,
        load_request=lambda: ReportQuery,
        summary="write an experiment's self-contained HTML report",
        description=(
            "Write an experiment's report as one self-contained HTML file, from its records only: "
            "the provenance card of the bound engine, the attempts and the trials with their plots "
            "(the `report` extra); a new file, named after its content by default."
        ),
        example="automl-setup report --experiment-id ID --workspace runs --out r.html",
        title="Write an experiment's report",
        hints=Hints(read_only=False, destructive=False, idempotent=True, open_world=False),
        mcp=Tool(
            "Write the self-contained HTML report of one experiment (provenance card, attempts "
            "timeline, optimisation history, trials, best trial) and return its content with the "
            "file's path and sha256.",
        ),
    ),
    Row(
        command="track",
        tool="track_experiment",
        operation=_track,
        load_request=lambda: TrackRequest,
        summary="write an experiment and its trials to an MLflow tracking server",
        description=(
            "Write an experiment to an MLflow tracking server (the `tracking` extra): one run for "
            "it, one nested run per trial with its params, metrics, status and times, the engine "
            "build it is bound to as tags on every run (automl.engine.commit, ...), and the "
            "report, binding and lock as artifacts. Found again by its tags: a second track writes "
            "only what changed; --follow syncs until the experiment is finished. Credentials come "
            "from MLflow's own variables (MLFLOW_TRACKING_TOKEN, or _USERNAME and _PASSWORD)."
        ),
        example=(
            "automl-setup track --experiment-id ID --workspace runs --tracking-uri "
            "http://mlflow:5000"
        ),
        title="Track an experiment in MLflow",
        hints=Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
        flags={
            "tracking_uri": Flag(metavar="URI"),
            "interval": Flag(metavar="SECONDS"),
            **STALL_FLAG,
        },
        cli_only=frozenset({"follow", "interval"}),
        why="an MCP call syncs once and returns (a follow would outlast every client's tool "
        "timeout); the command line can sync until the experiment is finished",
        mcp=Tool(
            "Write one experiment to an MLflow tracking server: a parent run, a nested run per "
            "trial (params, metrics, status, times), the bound engine build as automl.engine.* "
            "tags on every run, the report, binding and lock as artifacts; idempotent (runs "
            "found by their tags). One sync per call: while the experiment runs, call it again "
            "to sync the trials it adds.",
        ),
    ),
)
