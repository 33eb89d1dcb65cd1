"""The rows of the SLURM operations: the watcher (watch, watch register) and the controller
(submit, status, cancel)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_server.faces.registry.row import Flag, Hints, Operation, Row, Tool, own_exit_code
from mcp_server.slurm.requests import CancelRequest, SlurmStatusQuery, SubmitRequest

if TYPE_CHECKING:
    from mcp_server.slurm.jobregistry import Registration, WatchRegisterRequest
    from mcp_server.slurm.jobs import CancelledJob, SlurmStatus
    from mcp_server.slurm.submit import SubmittedController
    from mcp_server.slurm.watcher import WatchRequest, WatchTick


def _slurm_watch_request() -> type[WatchRequest]:
    from mcp_server.slurm.watcher import WatchRequest

    return WatchRequest


def _slurm_watch_register_request() -> type[WatchRegisterRequest]:
    from mcp_server.slurm.jobregistry import WatchRegisterRequest

    return WatchRegisterRequest


def _slurm_watch() -> Operation[WatchRequest, WatchTick]:
    from mcp_server.faces.render.slurm_watch import tick_text
    from mcp_server.slurm.watcher import WatchTick, tick

    return Operation(tick, WatchTick, tick_text)


def _slurm_watch_register() -> Operation[WatchRegisterRequest, Registration]:
    from mcp_server.faces.render.slurm_watch import registration_text
    from mcp_server.slurm.jobregistry import Registration, adopt

    return Operation(adopt, Registration, registration_text)


def _slurm_submit() -> Operation[SubmitRequest, SubmittedController]:
    from mcp_server.faces.render.slurm import submitted_text
    from mcp_server.slurm.submit import SubmittedController, submit_controller

    return Operation(submit_controller, SubmittedController, submitted_text)


def _slurm_status() -> Operation[SlurmStatusQuery, SlurmStatus]:
    from mcp_server.faces.render.slurm import slurm_status_text
    from mcp_server.slurm.jobs import SlurmStatus, slurm_status

    return Operation(slurm_status, SlurmStatus, slurm_status_text)


def _slurm_cancel() -> Operation[CancelRequest, CancelledJob]:
    from mcp_server.faces.render.slurm import cancelled_text
    from mcp_server.slurm.jobs import CancelledJob, slurm_cancel

    return Operation(slurm_cancel, CancelledJob, cancelled_text)


ROWS: tuple[Row[Any, Any], ...] = (
    Row(
        command="slurm watch",
        tool="watch_slurm",
        operation=_slurm_watch,
        load_request=_slurm_watch_request,
        summary="tick over the registered controller jobs",
        description=(
            "Look at every controller job registered in the workspace: once, or every --interval "
            "seconds until interrupted, reporting jobs that failed, were lost or wait too long, as "
            "text or one JSON document per tick (exit code 1 when a tick could not ask)."
        ),
        example="automl-setup slurm watch --workspace runs --interval 300",
        title="Watch the SLURM controller jobs (one tick)",
        hints=Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
        exit_rule=own_exit_code,
        cli_only=frozenset({"once", "interval"}),
        why="an MCP call is one tick; the command line can tick every --interval seconds",
        mcp=Tool(
            "One tick over the workspace's registered SLURM controller jobs: each job's scheduler "
            "state, generation and its experiment's own status, and a receipt (also appended to "
            "<workspace>/.automl-setup/slurm-receipts.jsonl) for everything that happened since "
            "the last tick: state changes, generation boundaries, long waits, a job that ended "
            "while its experiment is unfinished (with the resume command), conflicts, scheduler "
            "or storage errors.",
            fixed={"once": True},
        ),
    ),
    Row(
        command="slurm watch register",
        tool="register_slurm_watch",
        operation=_slurm_watch_register,
        load_request=_slurm_watch_register_request,
        summary="adopt an existing job as an experiment's controller",
        description=(
            "Register an existing SLURM job (one submitted before the watcher knew of it) as the "
            "controller of an experiment of the workspace, so watch ticks over it."
        ),
        example=(
            "automl-setup slurm watch register --job-id 4242 --experiment-id ID --workspace runs"
        ),
        title="Register a SLURM job as an experiment's controller",
        hints=Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
        mcp=Tool(
            "Adopt an existing SLURM job as the controller of an experiment of the workspace, so "
            "that watch_slurm ticks over it. Refused, naming both sides: the job registered for "
            "another experiment, a second live job for the same experiment, a job of another "
            "user.",
        ),
    ),
    Row(
        command="slurm submit",
        tool="submit_slurm_job",
        operation=_slurm_submit,
        load_request=lambda: SubmitRequest,
        summary="bind an experiment like launch and submit its job",
        description=(
            "Verify the engine, bind a new experiment to that exact build like launch does, write "
            "the controller batch script beside the binding and submit it with sbatch; the job "
            "runs the engine over up to --max-allocations allocations."
        ),
        example="automl-setup slurm submit --manifest m.yaml --workspace runs --python .venv-train "
        "--time 1:00:00",
        title="Submit an experiment to SLURM",
        hints=Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
        flags={
            "max_allocations": Flag(metavar="N"),
            "sbatch_args": Flag(name="--sbatch-arg", metavar="--OPT[=V]"),
        },
        mcp=Tool(
            "Bind a new experiment to the verified engine in `python` exactly as "
            "launch_experiment does, render its controller batch script into the experiment "
            "folder and submit it with sbatch. Ask the user for the partition, time limit and "
            "allocation cap, and for their yes, before calling this. Follow it with "
            "status_slurm_job.",
        ),
    ),
    Row(
        command="slurm status",
        tool="status_slurm_job",
        operation=_slurm_status,
        load_request=lambda: SlurmStatusQuery,
        summary="scheduler state, generation and trials of the job",
        description=(
            "Show the experiment's SLURM job as the scheduler and the records tell it: the job's "
            "state, the allocation generation it is on, and the experiment's trials."
        ),
        example="automl-setup slurm status --experiment-id ID --workspace runs",
        title="SLURM job of an experiment",
        hints=Hints(read_only=True, destructive=False, idempotent=True, open_world=True),
        mcp=Tool(
            "The experiment's SLURM job: scheduler state (fixed vocabulary, with the pending "
            "reason), generation (restart count), trials done and the newest attempts ledger "
            "entry.",
        ),
    ),
    Row(
        command="slurm cancel",
        tool="cancel_slurm_job",
        operation=_slurm_cancel,
        load_request=lambda: CancelRequest,
        summary="cancel the experiment's SLURM job (--approve)",
        description=(
            "Cancel the experiment's SLURM controller job with scancel, once the user approved "
            "(--approve); the experiment stays resumable from its saved state."
        ),
        example="automl-setup slurm cancel --experiment-id ID --workspace runs --approve",
        title="Cancel the SLURM job of an experiment",
        hints=Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
        mcp=Tool(
            "Cancel the experiment's SLURM job (scancel). Needs approve=true, given only after "
            "the user said yes; the reply carries the command that resumes the experiment later.",
        ),
    ),
)
