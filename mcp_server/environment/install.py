"""The install operation: resolve -> fetch -> build -> check -> install -> verify -> record,
and the environment's other entry points (verify, history, repair).

Nothing in the target environment is touched before the wheel is built and checked; the change
itself is a `Transaction` (transaction.py), undone on failure (rollback.py).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel

from mcp_server.environment.create import open_for_install
from mcp_server.environment.records import (
    BuildIdentity,
    HistoryEntry,
    InstallRecord,
    RecordStore,
    SourceIdentity,
)
from mcp_server.environment.rollback import recover_interrupted
from mcp_server.environment.target import TargetEnv, locate, locate_for_change
from mcp_server.environment.transaction import Progress, Transaction
from mcp_server.environment.verify import VerifyReport, verify_environment
from mcp_server.errors import SetupError
from mcp_server.fsutil import exclusive_lock
from mcp_server.requests import InstallRequest
from mcp_server.scratch import scratch_dir, sweep_stale
from mcp_server.source.build import build_wheel, check_wheel_metadata, read_wheel_metadata
from mcp_server.source.gitsource import fetch_commit, resolve_branch
from mcp_server.source.profile import EngineProfile
from mcp_server.values import BranchName, CommitId, TargetPath

STEPS = ("resolve", "fetch", "build", "check", "install", "verify", "record")
WORK_PREFIX = "automl-setup-work-"


def no_progress(step: str, message: str) -> None:
    """Default progress sink."""


class InstallResult(BaseModel):
    status: Literal["installed", "unchanged"]
    record: InstallRecord
    previous_commit: str | None
    verify: VerifyReport
    repaired: str | None = None


# Who is bound to an environment's engine (rule 5) is known only to the experiments layer
# above; it hands the question in: state dir -> "id (workspace)" of each unfinished one.
BoundExperiments = Callable[[Path], list[str]]


def install_engine(
    request: InstallRequest, bound: BoundExperiments, progress: Progress = no_progress
) -> InstallResult:
    """`bound` is required: no install may skip the check that keeps an engine in place
    under unfinished experiments. The request holds only checked values."""
    extras = sorted(set(request.extras))
    # The environment lock is held from before a new environment (--create-env) is usable;
    # a failure removes exactly what this call created.
    with open_for_install(request.python, create=request.create_env) as env:
        return _install_locked(
            request.profile, env, request.branch, request.commit, extras, bound, progress
        )


def _install_locked(
    profile: EngineProfile,
    env: TargetEnv,
    branch: BranchName | None,
    commit: CommitId | None,
    extras: list[str],
    bound: BoundExperiments,
    progress: Progress,
) -> InstallResult:
    """The install, called with the environment lock held."""
    store = RecordStore(env.state_dir)
    repaired = recover_interrupted(env, store)
    if repaired:
        progress("repair", repaired)
    previous = store.read_record()
    _entries, torn = store.read_history()
    if torn:
        raise SetupError(
            "install",
            f"the install history {store.history_path} has a torn last line ({torn})",
            "inspect it and cut the torn line off; the history is never rewritten silently",
        )
    progress("resolve", f"resolving {'refs/heads/' + branch if branch else commit}")
    requested_ref = None
    if branch is not None:
        resolution = resolve_branch(profile.repository, branch)
        commit, requested_ref = resolution.commit, resolution.ref
        progress("resolve", f"{resolution.ref} -> {commit}")
    assert commit is not None
    if previous is not None and _same_source(previous, profile, commit, extras):
        report = verify_environment(env, profile.distribution)
        if report.status == "verified":
            progress("verify", f"commit {commit[:12]} is already installed and verified")
            return InstallResult(
                status="unchanged",
                record=previous,
                previous_commit=previous.source.commit,
                verify=report,
                repaired=repaired,
            )
    _guard_bound_experiments(env, previous, bound)
    with scratch_dir(WORK_PREFIX) as work, ThreadPoolExecutor(max_workers=1) as pool:
        progress("fetch", f"fetching {commit[:12]} ({profile.subdirectory})")
        fetched = fetch_commit(profile.repository, commit, profile.subdirectory, work / "src")
        progress("build", f"building a wheel with SOURCE_DATE_EPOCH={fetched.commit_time}")
        # Read-only look at the environment (under its lock) while the wheel builds.
        before = pool.submit(env.probe, [profile.distribution])
        wheel = build_wheel(
            fetched.source_dir,
            work / "dist",
            fetched.commit_time,
            str(env.interpreter),
            work / "build.log",
        )
        progress("build", f"{wheel.path.name} sha256 {wheel.sha256}")
        meta = read_wheel_metadata(wheel.path)
        check_wheel_metadata(meta, profile, extras, before.result().python_version)
        progress("check", f"{meta.name} {meta.version} satisfies {profile.requirement}")
        source = SourceIdentity(
            repository=str(profile.repository),
            subdirectory=profile.subdirectory,
            requested_ref=requested_ref,
            commit=commit,
            subtree_id=fetched.subtree_id,
            commit_time=fetched.commit_time,
        )
        build = BuildIdentity(
            distribution=meta.name,
            version=meta.version,
            wheel_filename=wheel.path.name,
            wheel_sha256=wheel.sha256,
            record_digest=meta.record_digest,
            backend=wheel.backend,
        )
        transaction = Transaction(env, store, profile, source, build, meta, extras)
        record, report = transaction.run(wheel.path, before.result(), progress)
    return InstallResult(
        status="installed",
        record=record,
        previous_commit=previous.source.commit if previous else None,
        verify=report,
        repaired=repaired,
    )


def _same_source(
    previous: InstallRecord, profile: EngineProfile, commit: str, extras: list[str]
) -> bool:
    return (
        previous.source.commit == commit
        and previous.source.repository == str(profile.repository)
        and previous.source.subdirectory == profile.subdirectory
        and canonicalize_name(previous.build.distribution) == profile.canonical_distribution
        and SpecifierSet(profile.requirement).contains(previous.build.version, prereleases=True)
        and previous.install.extras == extras
    )


def _guard_bound_experiments(
    env: TargetEnv, previous: InstallRecord | None, bound: BoundExperiments
) -> None:
    """Rule 5: no different engine in place under unfinished experiments bound to this one."""
    if previous is None:
        return
    unfinished = bound(env.state_dir)
    if unfinished:
        names = ", ".join(unfinished)
        raise SetupError(
            "install",
            f"unfinished experiments are bound to the engine in {env.prefix}: {names}",
            "install the new engine into a separate environment (--python NEW --create-env)",
        )


def repair_environment(python: TargetPath | None) -> tuple[str, str]:
    """`automl-setup repair`: roll back an interrupted install, if there is one.
    Returns (the environment, what was done)."""
    env = locate_for_change(python)
    store = RecordStore(env.state_dir)
    if not env.state_dir.exists():
        return str(env.prefix), f"nothing to repair in {env.prefix}"
    with exclusive_lock(store.lock_path, step="repair", holder=f"environment {env.prefix}"):
        done = recover_interrupted(env, store)
    sweep_stale(WORK_PREFIX)
    return str(env.prefix), done or f"nothing to repair in {env.prefix}"


def history(python: TargetPath | None) -> tuple[list[HistoryEntry], int | None, str]:
    env = locate(python)
    entries, torn = RecordStore(env.state_dir).read_history()
    return entries, torn, str(env.prefix)


def verify(python: TargetPath | None, profile: EngineProfile) -> VerifyReport:
    env = locate(python)
    return verify_environment(env, profile.distribution)
