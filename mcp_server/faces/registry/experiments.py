"""The rows of the experiment operations: launch, resume, status, list, stop, logs, report,
track, and the wheel store's: store, recreate, lock."""

from __future__ import annotations

from mcp_server.faces.registry.row import (
    LOCAL_READ,
    STALL_FLAG,
    ExitCodes,
    Flag,
    Hints,
    Row,
    Tool,
    all_readable,
    engine_exit_code,
    own_exit_code,
    stopped,
)

REQ, RENDER = "mcp_server.requests", "mcp_server.faces.render"
ENGINE_EXIT: ExitCodes = (
    ("N", "in the foreground: the engine's own exit code (143: stopped by SIGTERM, its state "
     "saved; resume it)"),
)  # fmt: skip
# What a started engine's reply adds on the MCP face: the resource URIs of its attempt.
STARTED_AFTER = "mcp_server.faces.mcp.resources:started_reply"
STARTED_EXTRA = "mcp_server.faces.mcp.resources:StartedResources"
# A client is never sent thousands of statuses at once: the tool pages, the command line need not.
MCP_PAGE_SIZE = 100
DETACHED = "an MCP call always returns at once (detached); the command line can wait"

ROWS: tuple[Row, ...] = (
    Row(
        "launch",
        "launch_experiment",
        "mcp_server.experiments.launch:launch_experiment",
        f"{REQ}:LaunchRequest",
        "mcp_server.experiments.started:StartedEngine",
        f"{RENDER}.experiments:started_text",
        "start a new experiment bound to the verified engine",
        "Verify the environment's engine against its record, have the engine check the "
        "manifest (plan), bind a new experiment to that exact build (binding.json) and run the "
        "engine on it, in the foreground with its progress, or detached.",
        "automl-setup launch --manifest m.yaml --workspace runs --python .venv-train",
        "Launch an experiment",
        # A new experiment (an existing id is refused, never replaced); each call starts one.
        Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
        exit_rule=engine_exit_code,
        codes=ENGINE_EXIT,
        cli_only=frozenset({"detach"}),
        why=DETACHED,
        mcp=Tool(
            "Start a new experiment bound to the verified engine in `python`, detached. Returns "
            "at once with the engine's pid, log path and binding path; follow it with "
            "status_experiment.",
            fixed={"detach": True},
            after=STARTED_AFTER,
            extra=STARTED_EXTRA,
        ),
    ),
    Row(
        "resume",
        "resume_experiment",
        "mcp_server.experiments.resume:resume_experiment",
        f"{REQ}:ResumeRequest",
        "mcp_server.experiments.started:StartedEngine",
        f"{RENDER}.experiments:started_text",
        "resume an experiment on exactly its bound engine",
        "Resume an interrupted experiment on exactly the engine build it is bound to: the "
        "manifest's hash, the environment's record and every identity field must match, or it "
        "refuses naming each difference and the commands that recreate the bound engine. It "
        "never installs anything.",
        "automl-setup resume --experiment-id ID --workspace runs --manifest m.yaml "
        "--python .venv-train",
        "Resume an experiment on its bound engine",
        # Never installs or swaps anything; each call starts an engine and adds an attempt.
        Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
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
            after=STARTED_AFTER,
            extra=STARTED_EXTRA,
        ),
    ),
    Row(
        "status",
        "status_experiment",
        "mcp_server.experiments.status:experiment_status",
        f"{REQ}:StatusQuery",
        "mcp_server.experiments.status:ExperimentStatus",
        f"{RENDER}.experiments:status_text",
        "state, trials, best and bound engine of an experiment",
        "Show an experiment's state (never `running` while no engine holds its lock), the "
        "trials done of those planned, the trials table, the best trial, the bound engine, the "
        "last attempt and, when it was interrupted, the exact resume command. Reads the "
        "records only.",
        "automl-setup status --experiment-id ID --workspace runs",
        "Experiment status",
        LOCAL_READ,
        mcp=Tool(
            "State, trials done, best trial and bound engine of one experiment, read from its "
            "ledger.",
        ),
    ),
    Row(
        "list",
        "list_experiments",
        "mcp_server.experiments.status:list_experiments",
        f"{REQ}:ListQuery",
        "mcp_server.experiments.status:ExperimentListing",
        f"{RENDER}.experiments:listing_text",
        "list the experiments of a workspace",
        "List every experiment of a workspace (--workspace again for more) with its status "
        "(as `status` shows it), and every experiment folder that cannot be read, with why "
        "(exit code 1 when there is one). In id order; every one unless --page-size is given, "
        "then that many and the --cursor of the next page. --bound-commit, --identity-digest "
        "and --closure-member keep only the experiments bound to that build: which "
        "experiments ran on this engine commit?",
        "automl-setup list --workspace runs --workspace ../team/runs --bound-commit 4217559e",
        "List experiments",
        LOCAL_READ,
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
        "stop",
        "stop_experiment",
        "mcp_server.experiments.stop:stop_experiment",
        f"{REQ}:StopRequest",
        "mcp_server.experiments.stop:StopResult",
        f"{RENDER}.experiments:stop_text",
        "stop an experiment's engine: SIGTERM, wait, report",
        "Stop the engine automl-setup started for an experiment: SIGTERM, then wait up to the "
        "grace period for it to save its state and exit (with --kill, SIGKILL after it), and "
        "report what its ledger says; recorded in the attempts ledger. Exit code 1 when it "
        "still runs.",
        "automl-setup stop --experiment-id ID --workspace runs --grace 60",
        "Stop an experiment's engine",
        # Ends a running engine (it saves its state); a second call finds nothing running.
        Hints(read_only=False, destructive=True, idempotent=False, open_world=False),
        exit_rule=stopped,
        flags={"grace": Flag(metavar="S")},
        mcp=Tool(
            "SIGTERM to the engine automl-setup started for this experiment (checked by pid and "
            "start time: a reused pid is never signalled), then wait up to `grace` seconds for it "
            "to save and exit, and report what its ledger says. resume_experiment continues it.",
        ),
    ),
    Row(
        "logs",
        "logs_experiment",
        "mcp_server.experiments.logs:experiment_log",
        f"{REQ}:LogsQuery",
        "mcp_server.experiments.logs:LogTail",
        f"{RENDER}.experiments:logs_text",
        "the tail of an attempt's or a trial's log (64 KiB at most)",
        "Print the tail of an attempt's engine log (the last attempt by default) or of one "
        "trial's log, at most 64 KiB; with --follow, keep printing as it grows until the "
        "engine exits.",
        "automl-setup logs --experiment-id ID --workspace runs --trial 3",
        "Tail of an experiment's log",
        LOCAL_READ,
        flags={"attempt": Flag(metavar="N"), "trial": Flag(metavar="N")},
        exclusive=(("attempt", "trial"),),
        handler="mcp_server.faces.cli.experiments:run_logs",
        cli_only=frozenset({"follow"}),
        why="an MCP call returns the tail once; the command line can keep printing the log",
        mcp=Tool(
            "The last 64 KiB of the engine output of one attempt (the last one by default) or of "
            "one trial, credentials masked: read it to see why something failed.",
        ),
    ),
    Row(
        "report",
        "report_experiment",
        "mcp_server.report.make:make_report",
        f"{REQ}:ReportQuery",
        "mcp_server.report.make:ReportResult",
        f"{RENDER}.report:report_text",
        "write an experiment's self-contained HTML report",
        "Write an experiment's report as one self-contained HTML file, from its records only: "
        "the provenance card of the bound engine, the attempts and the trials with their plots "
        "(the `report` extra); a new file, named after its content by default.",
        "automl-setup report --experiment-id ID --workspace runs --out r.html",
        "Write an experiment's report",
        # One new HTML file: an existing file with other bytes is refused; the same records
        # give the same file.
        Hints(read_only=False, destructive=False, idempotent=True, open_world=False),
        mcp=Tool(
            "Write the self-contained HTML report of one experiment (provenance card, attempts "
            "timeline, optimisation history, trials, best trial) and return its content with the "
            "file's path and sha256.",
        ),
    ),
    Row(
        "store",
        "store_wheels",
        "mcp_server.experiments.storeops:run_store",
        "mcp_server.experiments.storeops:StoreRequest",
        "mcp_server.experiments.storeops:StoreReport",
        f"{RENDER}.store:store_text",
        "the wheel store: list, verify, keep, gc --keep-bound WORKSPACE...",
        "Look after the content-addressed store of the wheels automl-setup built and of the "
        "dependency wheels it keeps: list its entries, verify each against its hash, keep an "
        "experiment's whole bound closure (packed from the environment that holds it, so "
        "recreate needs no index or repository), or remove (gc) every wheel no binding in the "
        "named workspaces refers to.",
        "automl-setup store list\nautoml-setup store keep --experiment-id ID --workspace runs\n"
        "automl-setup store gc --keep-bound runs other-runs",
        "List, verify, keep into or garbage-collect the wheel store",
        # keep adds entries; gc removes every wheel no binding in keep_bound refers to.
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
        exit_rule=own_exit_code,
        flags={
            "action": Flag(positional=True, help="what to do"),
            "keep_bound": Flag(nargs="+", metavar="WORKSPACE"),
        },
        mcp=Tool(
            "The content-addressed wheel store: list its entries, verify every entry's bytes "
            "against its sha256, keep (with experiment_id and workspace) every member of the "
            "experiment's bound dependency closure, packed from the environment that holds it, so "
            "recreate_engine needs no index or repository; or gc: remove every wheel no binding "
            "in the keep_bound workspaces refers to.",
        ),
    ),
    Row(
        "recreate",
        "recreate_engine",
        "mcp_server.experiments.recreate:recreate_engine",
        "mcp_server.experiments.recreate:RecreateRequest",
        "mcp_server.experiments.recreate:RecreateResult",
        f"{RENDER}.store:recreate_text",
        "install an experiment's bound engine into a separate environment",
        "Install exactly the engine build an experiment is bound to into another environment, "
        "from the wheel store (re-hashed) or rebuilt from the bound commit and checked against "
        "the binding, so the experiment can be resumed there.",
        "automl-setup recreate --experiment-id ID --workspace runs --python .venv-bound "
        "--create-env",
        "Recreate an experiment's bound engine",
        # Into a separate environment only; a second call finds it installed, unchanged; may
        # fetch the bound commit when the store lacks the wheel.
        Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
        flags=STALL_FLAG,
        mcp=Tool(
            "Install exactly the engine build the experiment is bound to into the separate "
            "environment `python`: from the wheel store (offline) or by rebuilding the bound "
            "commit (refused unless the wheel's sha256 is the bound one); then checked field by "
            "field against the binding, so resume_experiment with that python is accepted.",
            steps="mcp_server.environment.install:STEPS",
        ),
    ),
    Row(
        "lock",
        "lock_experiment",
        "mcp_server.experiments.lock:lock_experiment",
        "mcp_server.experiments.lock:LockQuery",
        "mcp_server.experiments.lock:LockResult",
        f"{RENDER}.store:lock_text",
        "write a PEP 751 pylock.toml of an experiment's bound closure",
        "Write the closure an experiment is bound to as a PEP 751 pylock.toml: the engine by "
        "its stored wheel and sha256, every dependency at its bound version with its index's "
        "hashes, VCS dependencies at their bound commits; `uv pip sync` installs it into a new "
        "environment. A new file only.",
        "automl-setup lock --experiment-id ID --workspace runs --out pylock.toml",
        "Write a PEP 751 lock of an experiment's bound closure",
        # One new pylock.toml (other bytes at the path are refused); uv asks the index for each
        # bound version's files and hashes.
        Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
        flags=STALL_FLAG,
        mcp=Tool(
            "Write the closure the experiment is bound to as a PEP 751 pylock.toml (the engine by "
            "its stored wheel and sha256, every dependency at its bound version or commit), which "
            "`uv pip sync` installs into a new environment.",
            steps="mcp_server.experiments.lock:STEPS",
        ),
    ),
    Row(
        "track",
        "track_experiment",
        "mcp_server.tracking.track:track_experiment",
        f"{REQ}:TrackRequest",
        "mcp_server.tracking.track:TrackResult",
        f"{RENDER}.experiments:track_text",
        "write an experiment and its trials to an MLflow tracking server",
        "Write an experiment to an MLflow tracking server (the `tracking` extra): one run for "
        "it, one nested run per trial with its params, metrics, status and times, the engine "
        "build it is bound to as tags on every run (automl.engine.commit, ...), and the "
        "report, binding and lock as artifacts. Found again by its tags: a second track writes "
        "only what changed; --follow syncs until the experiment is finished. Credentials come "
        "from MLflow's own variables (MLFLOW_TRACKING_TOKEN, or _USERNAME and _PASSWORD).",
        "automl-setup track --experiment-id ID --workspace runs --tracking-uri http://mlflow:5000",
        "Track an experiment in MLflow",
        # Runs and artifacts on a server elsewhere; what is already there is only completed.
        Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
        flags={"tracking_uri": Flag(metavar="URI"), "interval": Flag(metavar="SECONDS")},
        cli_only=frozenset({"follow", "interval"}),
        why="an MCP call syncs once and returns (a follow would outlast every client's tool "
        "timeout); the command line can sync until the experiment is finished",
        mcp=Tool(
            "Write one experiment to an MLflow tracking server: a parent run, a nested run per "
            "trial (params, metrics, status, times), the bound engine build as automl.engine.* "
            "tags on every run, the report, binding and lock as artifacts; idempotent (runs "
            "found by their tags). One sync per call: while the experiment runs, call it again "
            "to sync the trials it adds.",
            steps="mcp_server.tracking.track:STEPS",
        ),
    ),
)
