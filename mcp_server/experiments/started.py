"""Starting the engine of an attempt (launch or resume): register it with the environment, run it
with the controller lock, and record the attempt and, in the foreground, its exit."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.environment.target import TargetEnv
from mcp_server.experiments.attempts import log_attempt, next_attempt
from mcp_server.experiments.binding import Binding
from mcp_server.experiments.engine import spawn, wait_forwarding_signals
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.registry import register_experiment


class StartedEngine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str
    action: Literal["launch", "resume"]
    pid: int
    detached: bool
    exit_code: int | None = Field(description="Engine exit code (null while it runs detached).")
    log_path: str
    binding_path: str
    attempts_path: str
    engine_commit: str
    identity_digest: str


def start_engine(
    files: ExperimentFiles,
    action: Literal["launch", "resume"],
    argv: list[str],
    env: TargetEnv,
    binding: Binding,
    lock_fd: int,
    detach: bool,
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
            environment=str(env.prefix),
            identity_digest=binding.engine.identity_digest,
            log=str(log_path),
        )
    exit_code = None
    if not detach:
        exit_code = wait_forwarding_signals(proc)
        log_attempt(files, action="exit", outcome="exited", pid=proc.pid, exit_code=exit_code)
    return StartedEngine(
        experiment_id=files.experiment_id,
        action=action,
        pid=proc.pid,
        detached=detach,
        exit_code=exit_code,
        log_path=str(log_path),
        binding_path=str(files.binding),
        attempts_path=str(files.attempts),
        engine_commit=binding.engine.source.commit,
        identity_digest=binding.engine.identity_digest,
    )
