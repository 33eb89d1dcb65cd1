"""`slurm submit` and `slurm render`: bind a new experiment exactly as `launch` does, render the
controller batch script into its folder and submit it with `sbatch --parsable`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.children.run import run_captured
from mcp_server.environment.target import TargetEnv, locate
from mcp_server.errors import Arg, Fix, InvalidInput, SetupError, command_line
from mcp_server.experiments.attempts import log_attempt
from mcp_server.experiments.binding import Binding, bound_commit
from mcp_server.experiments.engine import engine_script, require_record
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.launch import bind_new_experiment, run_argv
from mcp_server.experiments.manifest import read_manifest
from mcp_server.experiments.registered import register_experiment
from mcp_server.experiments.resume import resume_argv
from mcp_server.fsutil import exclusive_create
from mcp_server.redact import redact_text
from mcp_server.requests import LaunchRequest
from mcp_server.slurm.jobregistry import register_job
from mcp_server.slurm.requests import SubmitRequest
from mcp_server.slurm.template import ControllerValues, render, sha256_text
from mcp_server.values import JobId

SCRIPT_NAME = "controller.sbatch"
WARNING_SECONDS = 120  # the warning signal (USR1) this long before the time limit
SBATCH_TIMEOUT_S = 60.0


class SubmittedController(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment bound and submitted.")
    job_id: str = Field(description="The SLURM job id sbatch printed.")
    script_path: str = Field(description="The rendered controller: <experiment folder>/...")
    template_sha256: str = Field(description="sha256 of the rendered script.")
    job_log: str = Field(description="The job's output file (slurm-<job id>.out).")
    max_allocations: str = Field(description="Allocations the job may use in all.")
    binding_path: str = Field(description="The experiment's binding.json.")
    attempts_path: str = Field(description="The experiment's attempts ledger.")
    engine_commit: str | None = Field(
        description="Commit of the engine it is bound to; null: a reviewed wheel."
    )
    identity_digest: str = Field(description="Identity digest of the engine it is bound to.")
    notes: list[str] = Field(
        description="What else to know about the submission.", default_factory=list
    )


def automl_setup_executable() -> Path:
    """The automl-setup the batch script calls for its identity gate: the console script beside
    the interpreter running this command, recorded as an absolute path at submit time (a node
    must see the same path; docs/slurm.md)."""
    path = Path(sys.executable).absolute().parent / "automl-setup"
    if not path.is_file():
        raise SetupError(
            "slurm submit",
            f"no automl-setup executable beside {sys.executable} (looked for {path})",
            "run slurm submit with the automl-setup console script of an installed automl-setup",
        )
    return path


def _values(
    files: ExperimentFiles,
    env: TargetEnv,
    engine: tuple[str, str],
    manifest: Path,
    cap: str,
    run: list[str],
) -> ControllerValues:
    """What the script of this experiment knows; `engine` is (distribution, console script)."""
    return ControllerValues(
        automl_setup=automl_setup_executable(),
        experiment_id=files.experiment_id,
        workspace=files.workspace,
        engine_env=env.prefix,
        controller_lock=files.lock,
        max_allocations=cap,
        run_argv=run,
        resume_argv=resume_argv(env, *engine, manifest, files.workspace),
    )


def filename_pattern(path: Path) -> str:
    """`path` as an sbatch filename pattern (man sbatch, "filename pattern") naming exactly it:
    every '%' doubled. A backslash anywhere turns every replacement off (and is dropped), and
    SLURM has no escape for one, so such a path is refused."""
    text = str(path)
    if "\\" in text:
        raise InvalidInput(
            "slurm submit",
            f"the workspace path {text} contains a backslash, which sbatch's filename patterns "
            "cannot name (the job log would go elsewhere or the job fail to start)",
            ["give a ", Arg("workspace", "DIR"), " whose path has no backslash"],
        )
    return text.replace("%", "%%")


def sbatch_argv(request: SubmitRequest, files: ExperimentFiles, script: Path) -> list[str]:
    # --output is a filename pattern; --chdir and the script path are plain paths.
    argv = [
        "sbatch", "--parsable", "--requeue", f"--signal=B:USR1@{WARNING_SECONDS}",
        f"--job-name=automl-{files.experiment_id}", f"--chdir={files.dir}",
        f"--output={filename_pattern(files.dir)}/slurm-%j.out", "--open-mode=append",
    ]  # fmt: skip
    if request.time is not None:
        argv.append(f"--time={request.time}")
    if request.partition is not None:
        argv.append(f"--partition={request.partition}")
    return [*argv, *request.sbatch_args, str(script)]


def _sbatch(argv: list[str]) -> str:
    step = "slurm submit"
    try:
        proc = run_captured(argv, timeout=SBATCH_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(step, f"sbatch could not run: {exc}", "check `sinfo`") from None
    said = " ".join((proc.stderr or proc.stdout).split())[:300]
    if proc.returncode != 0:
        raise SetupError(
            step,
            f"sbatch refused the controller job (exit {proc.returncode}): {redact_text(said)}",
            "fix the partition, time or sbatch options and submit again; nothing was kept",
        )
    return JobId(proc.stdout.strip().split(";")[0])


def submit_controller(request: SubmitRequest) -> SubmittedController:
    filename_pattern(request.workspace.path)  # refused before anything is bound
    bind = LaunchRequest(
        manifest=request.manifest, workspace=request.workspace, python=request.python
    )

    def submit(
        files: ExperimentFiles, env: TargetEnv, binding: Binding, _lock_fd: int
    ) -> SubmittedController:
        engine, manifest = binding.engine, Path(binding.manifest_path)
        values = _values(
            files, env, (engine.build.distribution, engine.cli), manifest,
            request.max_allocations, binding.argv,
        )  # fmt: skip
        text = render(values)
        script = files.dir / SCRIPT_NAME
        try:
            exclusive_create(script, text.encode())
            job_id = _sbatch(sbatch_argv(request, files, script))
        except BaseException:
            # Everything in the folder was made by this call and nothing ran: the id stays free.
            shutil.rmtree(files.dir, ignore_errors=True)
            raise
        digest = binding.engine.identity_digest
        job_log = files.dir / f"slurm-{job_id}.out"
        sha = sha256_text(text)
        # The job exists now: its id goes into the ledger first, so no later failure loses it.
        log_attempt(
            files, action="submit", outcome="accepted", environment=str(env.prefix),
            identity_digest=digest, job_id=job_id, template_sha256=sha, log=str(job_log),
            reason=f"max allocations {request.max_allocations}",
        )  # fmt: skip
        register_experiment(env.state_dir, files.experiment_id, files.workspace, digest)
        notes = []
        try:  # for the watcher; the job exists either way, so a refusal is a note
            register_job(files.workspace, job_id, files.experiment_id, how="submit")
        except SetupError as exc:
            # Not the error's own remedy: the watcher never asks about a job it does not know.
            register = Fix("slurm watch register", (
                ("job_id", job_id), ("experiment_id", files.experiment_id),
                ("workspace", str(files.workspace)),
            ))  # fmt: skip
            notes.append(
                f"not registered for the watcher: {exc.step}: {exc.cause}; once that is "
                f"fixed, register it: {command_line(register)}"
            )
        return SubmittedController(
            experiment_id=files.experiment_id, job_id=job_id, script_path=str(script),
            template_sha256=sha, job_log=str(job_log), max_allocations=request.max_allocations,
            binding_path=str(files.binding), attempts_path=str(files.attempts),
            engine_commit=bound_commit(binding), identity_digest=digest, notes=notes,
        )  # fmt: skip

    return bind_new_experiment(bind, "submit", submit)


def render_controller(request: SubmitRequest) -> str:
    """The script `submit` would write for this request, binding and creating nothing (its
    engine command lines are the ones launch would bind now)."""
    manifest_path, _bytes, experiment_id = read_manifest(request.manifest)
    files = ExperimentFiles(request.workspace.path, experiment_id)
    env = locate(request.python)
    record = require_record(env, "slurm render")
    cli = engine_script(env.probe([record.build.distribution]), record)
    dist = record.build.distribution
    run = run_argv(env, dist, cli, manifest_path, files.workspace)
    return render(_values(files, env, (dist, cli), manifest_path, request.max_allocations, run))
