"""Resuming an experiment on exactly the engine build it is bound to; any difference refuses."""

from __future__ import annotations

import hashlib
import shlex

from mcp_server.environment.records import FieldDiff, RecordStore
from mcp_server.environment.target import locate
from mcp_server.environment.verify import verify_environment
from mcp_server.errors import SetupError
from mcp_server.experiments.attempts import log_attempt
from mcp_server.experiments.binding import (
    Binding,
    binding_differences,
    copy_origin,
    read_binding,
    recreate_commands,
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

    def __init__(self, step: str, cause: str, remedy: str, differences: list[FieldDiff]) -> None:
        super().__init__(
            step,
            cause,
            remedy,
            details=[d.describe() for d in differences],
        )
        self.differences = differences


def resume_experiment(request: ResumeRequest) -> StartedEngine:
    files = ExperimentFiles(request.workspace.path, request.experiment_id)
    require_experiment(files, "resume", remedy="resume takes an exact id; list them with")
    try:
        with controller_lock(files) as lock_fd:
            binding = read_binding(files)
            _refuse_a_copy(binding, files)
            return _resume_locked(files, binding, request, lock_fd)
    except SetupError as exc:
        log_attempt(
            files,
            action="resume",
            outcome="refused",
            reason=exc.message,
            differences=getattr(exc, "differences", []),
        )
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
) -> StartedEngine:
    recreate = recreate_commands(binding, request.manifest.path, files.workspace)
    remedy = "recreate the recorded engine in a separate environment and resume there:\n    " + (
        "\n    ".join(recreate)
    )
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
    store = RecordStore(env.state_dir)
    # Checked before the lock, which would create files in an environment we never installed.
    if store.read_record() is None:
        raise IdentityRefusal(
            "resume",
            f"no engine record in {env.prefix}: nothing proves it is the bound engine",
            remedy,
            [FieldDiff(field="record", recorded=binding.engine.identity_digest, found=None)],
        )
    with shared_lock(store.lock_path, step="resume", holder=f"environment {env.prefix}"):
        record = require_record(env, "resume")
        probe = env.probe([record.build.distribution])
        report = verify_environment(env, record.build.distribution, probe=probe)
        if report.status != "verified":
            raise IdentityRefusal(
                "resume",
                f"the engine in {env.prefix} fails verification ({report.status})",
                remedy,
                report.differences
                or [FieldDiff(field="verification", recorded="verified", found=report.status)],
            )
        differences = binding_differences(binding, env, record, probe)
        if differences:
            raise IdentityRefusal(
                "resume",
                f"the engine in {env.prefix} is not the build experiment "
                f"{binding.experiment_id} is bound to ({len(differences)} fields differ)",
                remedy,
                differences,
            )
        cli = engine_script(probe, record)
        args = ["resume", "--manifest", str(manifest_path), "--workspace", str(files.workspace)]
        argv = engine_command(env.interpreter, record.build.distribution, cli, [*args, "--approve"])
        return start_engine(files, "resume", argv, env, binding, lock_fd, request.detach)
