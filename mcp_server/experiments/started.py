"""Starting the engine of an attempt (launch or resume): register it with the environment, run it
with the controller lock, and record the attempt and, in the foreground, its exit."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.environment.target import TargetEnv
from mcp_server.environment.transaction import Progress
from mcp_server.errors import SetupError
from mcp_server.experiments.attempts import log_attempt, next_attempt
from mcp_server.experiments.binding import Binding, bound_commit
from mcp_server.experiments.engine import spawn, wait_forwarding_signals
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.logs import attempt_log
from mcp_server.experiments.process import process_start
from mcp_server.experiments.registered import register_experiment
from mcp_server.experiments.trialprogress import TrialWatch
from mcp_server.fsutil import storage_cause, storage_remedy


class StartedEngine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment's exact id.")
    action: Literal["launch", "resume"] = Field(description="What started the engine.")
    pid: int = Field(description="The engine process (its own session and process group).")
    detached: bool = Field(description="True when the call returned while the engine runs.")
    exit_code: int | None = Field(description="Engine exit code (null while it runs detached).")
    log_path: str = Field(description="The engine's stdout and stderr of this attempt.")
    binding_path: str = Field(description="The experiment's binding to its engine build.")
    attempts_path: str = Field(description="The experiment's attempts ledger.")
    engine_commit: str | None = Field(description="Commit of the engine build it runs on.")
    identity_digest: str = Field(description="Identity digest of that build.")
    engine_said: str | None = Field(
        None,
        description="When the engine exited with an error: the last line of its log, its own "
        "words (secrets masked).",
    )
    remedy: str | None = Field(
        None,
        description="When that line says the storage is full, over quota or read-only: what "
        "to do (then resume).",
    )


def start_engine(
    files: ExperimentFiles,
    action: Literal["launch", "resume"],
    argv: list[str],
    env: TargetEnv,
    binding: Binding,
    lock_fd: int,
    detach: bool,
    progress: Progress | None = None,
) -> StartedEngine:
    """Register with the environment (for the install guard), start the engine with the
    controller lock, log the attempt; in the foreground, wait and log the exit too."""
    register_experiment(
        env.state_dir, files.experiment_id, files.workspace, binding.engine.identity_digest
    )
    with next_attempt(files) as (attempt, log):
        log_path = files.log(attempt)
        proc = spawn(argv, env, log_path, lock_fd)
        log(
            action=action,
            outcome="accepted",
            pid=proc.pid,
            process_start=process_start(proc.pid),
            environment=str(env.prefix),
            identity_digest=binding.engine.identity_digest,
            log=str(log_path),
        )
    exit_code = None
    if not detach:
        watch = (
            TrialWatch(binding, files.workspace, str(env.prefix), progress) if progress else None
        )
        exit_code = wait_forwarding_signals(proc, watch.tick if watch else None)
        log_attempt(files, action="exit", outcome="exited", pid=proc.pid, exit_code=exit_code)
    said, remedy = _last_words(files, attempt) if exit_code else (None, None)
    return StartedEngine(
        experiment_id=files.experiment_id,
        action=action,
        pid=proc.pid,
        detached=detach,
        exit_code=exit_code,
        log_path=str(log_path),
        binding_path=str(files.binding),
        attempts_path=str(files.attempts),
        engine_commit=bound_commit(binding),
        identity_digest=binding.engine.identity_digest,
        engine_said=said,
        remedy=remedy,
    )


def _last_words(files: ExperimentFiles, attempt: int) -> tuple[str | None, str | None]:
    """The last line of an attempt's log, and the storage's remedy when that is the cause (a
    disk that filled while the engine ran: it stops as it stops, and says why there)."""
    try:
        _path, _size, text = attempt_log(files, attempt)
    except SetupError:
        return None, None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    storage = storage_cause(lines[-1], files.workspace) if lines else None
    return (lines[-1][:300] if lines else None), storage_remedy(*storage) if storage else None
