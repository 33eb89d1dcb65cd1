"""Resuming an experiment on exactly the engine build it is bound to; any difference refuses."""

from __future__ import annotations

import contextlib
import hashlib
import shlex
from collections.abc import Iterator
from pathlib import Path

from mcp_server.environment.probe import Probe
from mcp_server.environment.records import FieldDiff, InstallRecord, RecordStore
from mcp_server.environment.target import TargetEnv, locate
from mcp_server.environment.transaction import Progress
from mcp_server.environment.verify import verify_environment
from mcp_server.errors import Remedy, SetupError
from mcp_server.experiments.attempts import record_refusal
from mcp_server.experiments.binding import (
    Binding,
    binding_differences,
    copy_origin,
    read_binding,
    recreate_fixes,
)
from mcp_server.experiments.engine import engine_command, engine_script, require_record
from mcp_server.experiments.files import (
    ExperimentFiles,
    controller_lock,
    require_experiment,
)
from mcp_server.experiments.manifest import read_manifest
from mcp_server.experiments.started import StartedEngine, start_engine
from mcp_server.fsutil import shared_lock
from mcp_server.requests import ResumeRequest


class IdentityRefusal(SetupError):
    """A refusal that carries the field-level differences for the attempts ledger."""

    def __init__(
        self,
        step: str,
        cause: str,
        remedy: Remedy,
        differences: list[FieldDiff],
        notes: list[str] | None = None,
    ) -> None:
        super().__init__(
            step,
            cause,
            remedy,
            details=[d.describe() for d in differences] + (notes or []),
        )
        self.differences = differences


def resume_experiment(request: ResumeRequest, progress: Progress | None = None) -> StartedEngine:
    files = ExperimentFiles(request.workspace.path, request.experiment_id)
    require_experiment(files, "resume", remedy="resume takes an exact id; list them with")
    try:
        with controller_lock(files) as lock_fd:
            binding = read_binding(files)
            _refuse_a_copy(binding, files)
            return _resume_locked(files, binding, request, lock_fd, progress)
    except SetupError as exc:
        record_refusal(files, exc, action="resume")
        raise


def _refuse_a_copy(binding: Binding, files: ExperimentFiles) -> None:
    """Resume only the one workspace that holds the experiment: in a copy whose original still
    exists, each has its own controller lock and both could run at once."""
    recorded = copy_origin(binding, files)
    if recorded is None:
        return
    raise IdentityRefusal(
        "resume",
        f"{files.workspace} is a copy of {recorded.workspace}, which still holds experiment "
        f"{files.experiment_id}; each copy has its own controller lock, so two copies could "
        "run at once",
        f"resume it where it was launched (--workspace {shlex.quote(str(recorded.workspace))})"
        "; to continue this copy instead, first move the original workspace away",
        [FieldDiff(field="workspace", recorded=binding.workspace, found=str(files.workspace))],
    )


def _resume_locked(
    files: ExperimentFiles,
    binding: Binding,
    request: ResumeRequest,
    lock_fd: int,
    progress: Progress | None,
) -> StartedEngine:
    install, resume = recreate_fixes(binding, request.manifest.path, files.workspace)
    remedy: Remedy = [
        "recreate the recorded engine in a separate environment and resume there:\n    ",
        install,
        "\n    ",
        resume,
    ]
    manifest_path, manifest_bytes, manifest_id = read_manifest(request.manifest)
    digest = hashlib.sha256(manifest_bytes).hexdigest()
    if digest != binding.manifest_sha256 or manifest_id != binding.experiment_id:
        raise IdentityRefusal(
            "resume",
            f"the manifest {manifest_path} is not the one experiment {binding.experiment_id} "
            "was launched with",
            f"resume with the original manifest ({binding.manifest_path})",
            [FieldDiff(field="manifest_sha256", recorded=binding.manifest_sha256, found=digest)],
        )
    env = locate(request.python)
    with bound_engine(binding, env, remedy, "resume") as (record, probe):
        cli = engine_script(probe, record)
        argv = resume_argv(env, record.build.distribution, cli, manifest_path, files.workspace)
        return start_engine(files, "resume", argv, env, binding, lock_fd, request.detach, progress)


def resume_argv(
    env: TargetEnv, distribution: str, cli: str, manifest: Path, workspace: Path
) -> list[str]:
    """The engine command that resumes the experiment (the SLURM controller's too)."""
    args = ["resume", "--manifest", str(manifest), "--workspace", str(workspace), "--approve"]
    return engine_command(env.interpreter, distribution, cli, args)


@contextlib.contextmanager
def bound_engine(
    binding: Binding, env: TargetEnv, remedy: Remedy, step: str
) -> Iterator[tuple[InstallRecord, Probe]]:
    """The record and probe of the engine in `env`, held under the environment's shared lock,
    when it verifies and is exactly the build `binding` names; otherwise an IdentityRefusal
    with every differing field (resume, and the SLURM gate on every allocation)."""
    store = RecordStore(env.state_dir)
    # Checked before the lock, which would create files in an environment we never installed.
    if store.read_record() is None:
        raise IdentityRefusal(
            step,
            f"no engine record in {env.prefix}: nothing proves it is the bound engine",
            remedy,
            [FieldDiff(field="record", recorded=binding.engine.identity_digest, found=None)],
        )
    with shared_lock(store.lock_path, step=step, holder=f"environment {env.prefix}"):
        record = require_record(env, step)
        probe = env.probe([record.build.distribution])
        report = verify_environment(env, record.build.distribution, probe=probe)
        if report.status != "verified":
            raise IdentityRefusal(
                step,
                f"the engine in {env.prefix} fails verification ({report.status})",
                remedy,
                report.differences
                or [FieldDiff(field="verification", recorded="verified", found=report.status)],
                report.notes,  # e.g. that a `uv sync` removed the engine, and what to do
            )
        differences = binding_differences(binding, env, record, probe)
        if differences:
            raise IdentityRefusal(
                step,
                f"the engine in {env.prefix} is not the build experiment "
                f"{binding.experiment_id} is bound to ({len(differences)} fields differ)",
                remedy,
                differences,
            )
        yield record, probe
