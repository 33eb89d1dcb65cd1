"""The registry of SLURM controller jobs of a workspace, which the watcher ticks over.

`slurm submit` registers the job it submitted (`register_job(workspace, job_id, experiment_id,
how="submit")`, right after sbatch printed the id); `slurm watch register` adopts an existing
job. A registration names the job's owner, the identity digest of the experiment's binding and
the submit time. It is made under the registry lock (a flock of the workspace's sidecar
directory, so a refusal creates no file) and written atomically. Refused, naming both sides:
the same job for another experiment, a second live job for the same experiment, a job of
another user. Refused before anything is written: storage that is read-only or full.

    <workspace>/.automl-setup/slurm-jobs.json     this registry (atomic replace)
    <workspace>/.automl-setup/slurm-watch.json    what the watcher saw last (watch.py)
    <workspace>/.automl-setup/slurm-receipts.jsonl  the watcher's receipts (receipts.py)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.environment.records import utc_now
from mcp_server.errors import SetupError
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.files import SIDECAR, ExperimentFiles, require_experiment
from mcp_server.fsutil import atomic_write_bytes, io_failure, read_file, state_dir
from mcp_server.persisted import Persisted, load_persisted
from mcp_server.requests import Request
from mcp_server.slurm.scheduler import query_jobs
from mcp_server.values import ExperimentId, JobId, WorkspacePath

REGISTRY = "slurm-jobs.json"
MIN_FREE_BYTES = 1 << 20  # below this a write may tear; refuse first and say so
STORAGE_REMEDY = (
    "make the workspace writable (remount it read-write, free disk space), or watch from a "
    "workspace on usable storage; nothing was written"
)


class RegisteredJob(Persisted):
    job_id: str = Field(description="SLURM job id.")
    experiment_id: str = Field(description="The experiment it controls.")
    uid: int = Field(description="Owner: the uid the scheduler reports for the job.")
    user: str = Field(description="Owner's user name.")
    identity_digest: str = Field(description="Identity digest of the experiment's binding.")
    submitted: str = Field(description="Submit time (ISO 8601 UTC) as the scheduler knew it.")
    registered: str = Field(description="When it was registered (ISO 8601 UTC).")
    how: Literal["submit", "adopt"] = Field(
        description="submit (by slurm submit) or adopt (by slurm watch register)."
    )


class JobRegistry(Persisted):
    schema_version: Literal[1] = 1
    jobs: list[RegisteredJob] = Field(default_factory=list)


class WatchRegisterRequest(Request):
    job_id: JobId
    experiment_id: ExperimentId
    workspace: WorkspacePath


class Registration(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    job: RegisteredJob = Field(description="The job as registered.")
    already_registered: bool = Field(description="The same job was registered for it before.")
    registry: str = Field(
        description="The registry file (<workspace>/.automl-setup/slurm-jobs.json)."
    )


def sidecar(workspace: Path) -> Path:
    return workspace / SIDECAR


def registry_path(workspace: Path) -> Path:
    return sidecar(workspace) / REGISTRY


def require_usable_storage(directory: Path, step: str) -> None:
    """Refuse, before writing anything, on storage that cannot take a write: a read-only file
    system, one (nearly) full, a directory this process may not write."""
    try:
        stat = os.statvfs(directory)
    except OSError as exc:
        raise io_failure(step, directory, exc) from None
    problem = ""
    if stat.f_flag & os.ST_RDONLY:
        problem = "is on a read-only file system"
    elif stat.f_bavail * stat.f_frsize < MIN_FREE_BYTES:
        problem = f"is full ({stat.f_bavail * stat.f_frsize} bytes free)"
    elif not os.access(directory, os.W_OK):
        problem = "is not writable by this user"
    if problem:
        raise SetupError(
            step, f"the watch registry's storage {directory} {problem}", STORAGE_REMEDY
        )


@contextlib.contextmanager
def registry_lock(workspace: Path, step: str) -> Iterator[None]:
    """Exclusive flock of the sidecar directory (blocking: registrations and ticks are short,
    and a second watcher must wait for the first one's receipts, not repeat them)."""
    with state_dir(sidecar(workspace), step=step) as fd:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:  # e.g. ENOLCK: a network file system without locks
            raise io_failure(step, sidecar(workspace), exc) from None
        yield


def read_registry(workspace: Path) -> JobRegistry:
    path = registry_path(workspace)
    data = read_file(path)
    if data is None:
        return JobRegistry()
    remedy = "restore it from a backup, or move it aside and register the jobs again"
    return load_persisted(JobRegistry, data, what="watch registry", path=path, remedy=remedy)


def _conflict(cause: str) -> SetupError:
    return SetupError(
        "register job",
        cause,
        "cancel or finish the other job first (`automl-setup slurm cancel`), or register "
        "under the experiment the job really runs; the registry was not changed",
    )


def register_job(
    workspace: Path, job_id: str, experiment_id: str, *, how: Literal["submit", "adopt"]
) -> Registration:
    """Register `job_id` as the controller of `experiment_id` in `workspace` (see above)."""
    step = "register job"
    job, experiment = JobId(job_id), ExperimentId(experiment_id)
    files = ExperimentFiles(workspace, experiment)
    require_experiment(files, step, remedy="register only experiments launched or submitted:")
    digest = read_binding(files).engine.identity_digest
    require_usable_storage(sidecar(workspace), step)
    with registry_lock(workspace, step):
        registry = read_registry(workspace)
        same = [r for r in registry.jobs if r.job_id == job]
        if same and same[0].experiment_id != experiment:
            raise _conflict(
                f"job {job} is already registered for experiment {same[0].experiment_id} (by "
                f"{same[0].user}, {same[0].registered}); refusing it for experiment {experiment}"
            )
        if same:
            return Registration(
                job=same[0], already_registered=True, registry=str(registry_path(workspace))
            )
        others = [r for r in registry.jobs if r.experiment_id == experiment]
        views = query_jobs([job, *(r.job_id for r in others)])
        view = views[job]
        if view.source == "none":
            raise SetupError(
                step,
                f"the scheduler does not know job {job} ({view.note})",
                "pass the id `sbatch --parsable` printed for a job that exists",
            )
        me = os.getuid()
        if view.uid != me:
            raise _conflict(
                f"job {job} belongs to uid {view.uid} ({view.user}), this registry is written "
                f"by uid {me} ({_user(me)})"
            )
        live = [r for r in others if views[r.job_id].live]
        if view.live and live:
            raise _conflict(
                f"experiment {experiment} already has live job {live[0].job_id} "
                f"({views[live[0].job_id].state}); refusing a second live job {job} "
                f"({view.state}) for it"
            )
        entry = RegisteredJob(
            job_id=job,
            experiment_id=experiment,
            uid=me,
            user=_user(me),
            identity_digest=digest,
            submitted=view.submitted or utc_now(),
            registered=utc_now(),
            how=how,
        )
        updated = JobRegistry(jobs=[*registry.jobs, entry])
        path = registry_path(workspace)
        atomic_write_bytes(path, updated.model_dump_json(indent=2).encode() + b"\n")
    return Registration(job=entry, already_registered=False, registry=str(path))


def adopt(request: WatchRegisterRequest) -> Registration:
    """`slurm watch register`: adopt an existing job."""
    return register_job(request.workspace.path, request.job_id, request.experiment_id, how="adopt")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
