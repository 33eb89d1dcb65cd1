"""The rows of the SLURM operations: the watcher (watch, watch register) and the controller
(submit, status, cancel)."""

from __future__ import annotations

from mcp_server.faces.registry.row import Flag, Hints, Row, Tool, own_exit_code

RENDER = "mcp_server.faces.render"

ROWS: tuple[Row, ...] = (
    Row(
        "slurm watch",
        "watch_slurm",
        "mcp_server.slurm.watcher:tick",
        "mcp_server.slurm.watcher:WatchRequest",
        "mcp_server.slurm.watcher:WatchTick",
        f"{RENDER}.slurm_watch:tick_text",
        "tick over the registered controller jobs",
        "Look at every controller job registered in the workspace: once, or every --interval "
        "seconds until interrupted, reporting jobs that failed, were lost or wait too long, as "
        "text or one JSON document per tick (exit code 1 when a tick could not ask).",
        "automl-setup slurm watch --workspace runs --interval 300",
        "Watch the SLURM controller jobs (one tick)",
        # Appends receipts and the watcher's memory; a second tick reports only what happened
        # since the first; asks the scheduler.
        Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
        exit_rule=own_exit_code,
        handler="mcp_server.faces.cli.slurm_watch:watch",
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
        "slurm watch register",
        "register_slurm_watch",
        "mcp_server.slurm.jobregistry:adopt",
        "mcp_server.slurm.jobregistry:WatchRegisterRequest",
        "mcp_server.slurm.jobregistry:Registration",
        f"{RENDER}.slurm_watch:registration_text",
        "adopt an existing job as an experiment's controller",
        "Register an existing SLURM job (one submitted before the watcher knew of it) as the "
        "controller of an experiment of the workspace, so watch ticks over it.",
        "automl-setup slurm watch register --job-id 4242 --experiment-id ID --workspace runs",
        "Register a SLURM job as an experiment's controller",
        # One registry entry (a conflicting one is refused); the same job again is "already
        # registered"; asks the scheduler about the job.
        Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
        mcp=Tool(
            "Adopt an existing SLURM job as the controller of an experiment of the workspace, so "
            "that watch_slurm ticks over it. Refused, naming both sides: the job registered for "
            "another experiment, a second live job for the same experiment, a job of another "
            "user.",
        ),
    ),
    Row(
        "slurm submit",
        "submit_slurm_job",
        "mcp_server.slurm.submit:submit_controller",
        "mcp_server.slurm.requests:SubmitRequest",
        "mcp_server.slurm.submit:SubmittedController",
        f"{RENDER}.slurm:submitted_text",
        "bind an experiment like launch and submit its job",
        "Verify the engine, bind a new experiment to that exact build like launch does, write "
        "the controller batch script beside the binding and submit it with sbatch; the job runs "
        "the engine over up to --max-allocations allocations.",
        "automl-setup slurm submit --manifest m.yaml --workspace runs --python .venv-train "
        "--time 1:00:00",
        "Submit an experiment to SLURM",
        # Binds a new experiment (an existing id is refused) and submits a job, each call.
        Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
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
        "slurm status",
        "status_slurm_job",
        "mcp_server.slurm.jobs:slurm_status",
        "mcp_server.slurm.requests:SlurmStatusQuery",
        "mcp_server.slurm.jobs:SlurmStatus",
        f"{RENDER}.slurm:slurm_status_text",
        "scheduler state, generation and trials of the job",
        "Show the experiment's SLURM job as the scheduler and the records tell it: the job's "
        "state, the allocation generation it is on, and the experiment's trials.",
        "automl-setup slurm status --experiment-id ID --workspace runs",
        "SLURM job of an experiment",
        Hints(read_only=True, destructive=False, idempotent=True, open_world=True),
        mcp=Tool(
            "The experiment's SLURM job: scheduler state (fixed vocabulary, with the pending "
            "reason), generation (restart count), trials done and the newest attempts ledger "
            "entry.",
        ),
    ),
    Row(
        "slurm cancel",
        "cancel_slurm_job",
        "mcp_server.slurm.jobs:slurm_cancel",
        "mcp_server.slurm.requests:CancelRequest",
        "mcp_server.slurm.jobs:CancelledJob",
        f"{RENDER}.slurm:cancelled_text",
        "cancel the experiment's SLURM job (--approve)",
        "Cancel the experiment's SLURM controller job with scancel, once the user approved "
        "(--approve); the experiment stays resumable from its saved state.",
        "automl-setup slurm cancel --experiment-id ID --workspace runs --approve",
        "Cancel the SLURM job of an experiment",
        # Ends the job; the experiment's state is saved and resumable.
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
        mcp=Tool(
            "Cancel the experiment's SLURM job (scancel). Needs approve=true, given only after "
            "the user said yes; the reply carries the command that resumes the experiment later.",
        ),
    ),
)
