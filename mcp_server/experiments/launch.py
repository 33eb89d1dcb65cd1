"""Launching a new experiment: bind it to the verified engine of an environment, then start it."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, TypeVar

from mcp_server import __build__
from mcp_server.environment.identity import compute_identity_digest, environment_info
from mcp_server.environment.probe import Probe
from mcp_server.environment.records import InstallRecord, RecordStore, utc_now
from mcp_server.environment.target import TargetEnv, locate
from mcp_server.environment.transaction import Progress
from mcp_server.environment.verify import verify_environment
from mcp_server.errors import Fix, Remedy, SetupError
from mcp_server.experiments.attempts import record_refusal
from mcp_server.experiments.binding import Binding, EngineBinding, resume_fix
from mcp_server.experiments.engine import engine_command, engine_plan, engine_script, require_record
from mcp_server.experiments.files import ExperimentFiles, controller_lock
from mcp_server.experiments.manifest import read_manifest
from mcp_server.experiments.started import StartedEngine, start_engine
from mcp_server.fsutil import exclusive_create, new_directory, shared_lock
from mcp_server.requests import LaunchRequest

T = TypeVar("T")


def _verified_record(env: TargetEnv, step: str) -> tuple[InstallRecord, Probe]:
    """The record of an engine that verifies, and the probe that verified it (one probe
    serves every later question about the environment)."""
    record = require_record(env, step)
    probe = env.probe([record.build.distribution])
    report = verify_environment(env, record.build.distribution, probe=probe)
    if report.status != "verified":
        raise SetupError(
            step,
            f"the engine in {env.prefix} fails verification ({report.status})",
            ["see the differences with ", Fix("verify", (("python", str(env.prefix)),))],
            details=[d.describe() for d in report.differences] + report.notes,
        )
    return record, probe


@contextlib.contextmanager
def _unbound_removed_on_failure(files: ExperimentFiles, made: list[Path]) -> Iterator[None]:
    """Launch made `files.dir` in this call (and the folders in `made`, innermost first); until
    an attempt is in its ledger (the engine started, or the job was submitted) it holds nothing
    of value: a failure before then (the binding's write, or the environment's registry entry
    after it, on a full disk) removes it again, and each folder made while still empty, so the
    id stays free and the workspace is as it was."""
    try:
        yield
    except BaseException:
        if not files.attempts.exists():
            shutil.rmtree(files.dir, ignore_errors=True)
            _remove_while_empty(made)
        raise


def _remove_while_empty(folders: list[Path]) -> None:
    for folder in folders:
        with contextlib.suppress(OSError):  # not empty: someone else's now
            folder.rmdir()


def run_argv(
    env: TargetEnv, distribution: str, cli: str, manifest: Path, workspace: Path
) -> list[str]:
    """The engine command that starts the experiment: the binding's argv (and the SLURM
    controller's first allocation's, byte for byte)."""
    args = ["run", "--manifest", str(manifest), "--workspace", str(workspace), "--approve"]
    return engine_command(env.interpreter, distribution, cli, args)


def launch_experiment(request: LaunchRequest, progress: Progress | None = None) -> StartedEngine:
    """Launch; in the foreground, `progress` gets a line whenever the trials move on."""

    def start(
        files: ExperimentFiles, env: TargetEnv, binding: Binding, lock_fd: int
    ) -> StartedEngine:
        argv = binding.argv
        return start_engine(files, "launch", argv, env, binding, lock_fd, request.detach, progress)

    return bind_new_experiment(request, "launch", start)


def bind_new_experiment(
    request: LaunchRequest,
    step: Literal["launch", "submit"],
    then: Callable[[ExperimentFiles, TargetEnv, Binding, int], T],
) -> T:
    """Verify the engine and bind a new experiment to it, then `then(files, env, binding,
    lock_fd)` under the experiment's controller lock: launch starts the engine there, `slurm
    submit` submits the controller job that will (one binding code path for both)."""
    manifest_path, manifest_bytes, experiment_id = read_manifest(request.manifest)
    files = ExperimentFiles(request.workspace.path, experiment_id)
    env = locate(request.python)
    if files.engine_dir.exists() or files.dir.exists():
        if files.engine_dir.exists():
            resume = resume_fix(files, str(manifest_path), str(env.prefix))
            remedy: Remedy = ["continue it with ", resume, ", or give the experiment another id"]
        else:  # launched before, but the engine refused to start it (see attempt-1.log)
            remedy = (
                f"the engine never created it (see {files.log(1)}); to reuse the id, remove "
                f"{files.dir} after reading that log, or give the experiment another id"
            )
        refusal = SetupError(
            step, f"experiment {experiment_id} already exists in {files.workspace}", remedy
        )
        if files.dir.is_dir():  # an experiment of ours: its ledger records the refusal
            record_refusal(files, refusal, action=step)
        raise refusal
    require_record(env, step)  # before the lock, which would create files in the env
    store = RecordStore(env.state_dir)
    # Shared: launches and resumes of different experiments proceed together; an install or
    # repair (exclusive) is refused while any of them holds it, and refuses them while it runs.
    with shared_lock(store.lock_path, step=step, holder=f"environment {env.prefix}"):
        record, probe = _verified_record(env, step)
        cli = engine_script(probe, record)
        engine_plan(env, record.build.distribution, cli, manifest_path, files.workspace)
        made = [f for f in (files.dir.parent, files.workspace) if not f.exists()]
        try:
            new_directory(files.dir)
        except FileExistsError:
            raise SetupError(
                step,
                f"experiment {experiment_id} was launched concurrently by another process",
                "check it with `automl-setup status`, or give this experiment another id",
            ) from None
        except BaseException:  # a full disk between the folders: none made stays behind
            _remove_while_empty(made)
            raise
        with _unbound_removed_on_failure(files, made), controller_lock(files) as lock_fd:
            argv = run_argv(env, record.build.distribution, cli, manifest_path, files.workspace)
            env_now = environment_info(probe, list(record.environment.dependencies))
            closure = probe.closure(record.build.distribution, list(record.install.extras))
            # The binding's identity is the build plus the environment as it is now (it may
            # have drifted since install; the digest must match the fields it is bound to).
            digest = compute_identity_digest(record.source, record.build, env_now, closure)
            binding = Binding(
                experiment_id=experiment_id,
                workspace=str(files.workspace),
                manifest_path=str(manifest_path),
                manifest_sha256=hashlib.sha256(manifest_bytes).hexdigest(),
                engine=EngineBinding(
                    identity_digest=digest,
                    source=record.source,
                    build=record.build,
                    environment=env_now,
                    environment_path=str(env.prefix),
                    interpreter=str(env.interpreter),
                    cli=cli,
                    extras=list(record.install.extras),
                    closure=closure,
                ),
                argv=argv,
                host=socket.gethostname(),
                time=utc_now(),
                tool_version=__build__,
            )
            exclusive_create(files.binding, binding.model_dump_json(indent=2).encode() + b"\n")
            return then(files, env, binding, lock_fd)
