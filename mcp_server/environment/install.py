"""The install operation: resolve -> fetch -> build -> check -> install -> verify -> record,
and the environment's other entry points (verify, history, repair).

Nothing in the target environment is touched before the wheel is built and checked; the change
itself is a `Transaction` (transaction.py), undone on failure (rollback.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel, Field

from mcp_server.children.bound import Watch
from mcp_server.children.uv import uv_version
from mcp_server.environment.artifact import Artifact, reviewed_wheel, store_built
from mcp_server.environment.create import open_for_install
from mcp_server.environment.gepa_pin import check_installed_gepa
from mcp_server.environment.pins import ClosurePolicy, moving_requirements, refuse_moving
from mcp_server.environment.records import (
    HistoryEntry,
    InstallRecord,
    RecordStore,
    SourceIdentity,
)
from mcp_server.environment.rollback import recover_interrupted
from mcp_server.environment.startcheck import start_failure
from mcp_server.environment.target import TargetEnv, locate, locate_for_change
from mcp_server.environment.torch_guard import refuse_other_torch
from mcp_server.environment.transaction import STEPS as STEPS  # re-exported: the faces show them
from mcp_server.environment.transaction import Progress, Transaction
from mcp_server.environment.verify import VerifyReport, verify_environment
from mcp_server.errors import Fix, SetupError
from mcp_server.fsutil import exclusive_lock
from mcp_server.requests import InstallRequest
from mcp_server.scratch import scratch_dir, sweep_stale
from mcp_server.source.gitsource import fetch_commit, resolve_branch
from mcp_server.source.profile import EngineProfile, ProfileSource
from mcp_server.source.wheelbuild import build_wheel, check_wheel_metadata
from mcp_server.values import BranchName, CommitId, TargetPath

WORK_PREFIX = "automl-setup-work-"


def no_progress(step: str, message: str) -> None:
    """Default progress sink."""


class InstallResult(BaseModel):
    status: Literal["installed", "unchanged"] = Field(
        description="installed, or unchanged (that exact build was installed already)."
    )
    record: InstallRecord = Field(description="The install record written (the commit point).")
    previous_commit: str | None = Field(description="Commit of the engine it replaced.")
    verify: VerifyReport = Field(description="The verification after installing.")
    repaired: str | None = Field(None, description="What an interrupted install left, repaired.")
    restored: list[str] = Field(
        default_factory=list,
        description="What differed from the record of this same build before it was reinstalled "
        "over it (modified files, scripts): repaired by this install.",
    )
    profile_source: ProfileSource = Field(description="Which engine profile, and from where.")


# Who is bound to an environment's engine (transition rule 2) is known only to the experiments layer
# above; it hands the question in: state dir -> "id (workspace)" of each unfinished one.
BoundExperiments = Callable[[Path], list[str]]
# The caller's own call for the same engine in a new environment (and prose): the guard's remedy.
Again = tuple[str | Fix, ...]


def install_engine(
    request: InstallRequest, bound: BoundExperiments, progress: Progress = no_progress
) -> InstallResult:
    """`bound` is required: no install may skip the check that keeps an engine in place
    under unfinished experiments. The request holds only checked values."""
    extras: list[str] = sorted(set(request.extras))
    ready = None
    if request.wheel is not None and request.sha256 is not None:
        # A reviewed wheel is hashed and checked before anything is touched.
        ready = reviewed_wheel(request.wheel.path, request.sha256, request.profile)
    # The environment lock is held from before a new environment (--create-env) is usable;
    # a failure removes exactly what this call created.
    policy = ClosurePolicy(require_pinned=request.require_pinned)
    watch = Watch.of(request.stall_timeout, progress)
    with open_for_install(request.python, create=request.create_env) as env:
        return _install_locked(
            request.profile, env, request.branch, request.commit, extras, bound, progress, ready,
            expect=request.expect_commit, policy=policy, again=_asked_again(request), watch=watch,
        )  # fmt: skip


def _asked_again(request: InstallRequest) -> Again:
    """This install call into a new environment: the engine exactly as asked (source, the
    profile fields that are not the default, the extras), so a remedy copied as it is installs
    that engine, never the default branch."""
    default = EngineProfile()
    engine = [
        (name, str(getattr(request.profile, name)))
        for name in ("repository", "subdirectory", "distribution", "requirement")
        if getattr(request.profile, name) != getattr(default, name)
    ]
    wheel = str(request.wheel.path) if request.wheel is not None else None
    source = (
        ("branch", request.branch), ("expect_commit", request.expect_commit),
        ("commit", request.commit), ("wheel", wheel), ("sha256", request.sha256),
    )  # fmt: skip
    call = Fix("install", (*source, *engine, ("python", "NEW"), ("create_env", True)))
    extras = sorted(set(request.extras))
    # A call renders no list of values: prose names the extras.
    return (call, f" (with the extras {', '.join(extras)})") if extras else (call,)


def install_artifact(
    profile: EngineProfile,
    python: TargetPath,
    create_env: bool,
    artifact: Artifact,
    extras: list[str],
    bound: BoundExperiments,
    progress: Progress = no_progress,
    policy: ClosurePolicy | None = None,
    *,
    again: Again,
    watch: Watch,
) -> InstallResult:
    """Install a wheel already in the store, with `extras`, with the identity it had
    (`recreate`; `policy` pins its dependency closure; `watch` bounds uv's fetches)."""
    with open_for_install(python, create=create_env) as env:
        extras = sorted(set(extras))
        return _install_locked(
            profile, env, None, None, extras, bound, progress, artifact, policy=policy,
            again=again, watch=watch,
        )  # fmt: skip


def _install_locked(
    profile: EngineProfile,
    env: TargetEnv,
    branch: BranchName | None,
    commit: CommitId | None,
    extras: list[str],
    bound: BoundExperiments,
    progress: Progress,
    ready: Artifact | None = None,
    *,
    expect: CommitId | None = None,
    policy: ClosurePolicy | None = None,
    again: Again,
    watch: Watch,
) -> InstallResult:
    """The install, called with the environment lock held: of `ready` (a wheel in the store),
    or else of the branch (which must point at `expect` when given) or commit, built here;
    `again` asks for the same engine in a new environment (the guard's remedy); every git and
    uv is given up on under `watch`'s stall bound."""
    store = RecordStore(env.state_dir)
    repaired = recover_interrupted(env, store, watch)
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
    requested_ref = None
    if ready is None:
        progress("resolve", profile.source().describe())
        progress(
            "resolve",
            f"resolving refs/heads/{branch}"
            if branch
            else f"commit {commit} given: nothing to resolve (the fetch checks it exists)",
        )
        if branch is not None:
            resolution = resolve_branch(profile.repository, branch, watch, expect)
            commit, requested_ref = CommitId(resolution.commit), resolution.ref
            progress("resolve", f"{resolution.ref} -> {commit}")
        assert commit is not None
        same = previous is not None and _same_source(previous, profile, commit, extras)
    else:
        same = previous is not None and _same_artifact(previous, ready, extras)
    restored: list[str] = []
    if previous is not None and same:
        report = verify_environment(env, profile.distribution)
        drift = [d for d in report.differences if d.field.startswith("closure.")]
        if report.status == "mismatch" and len(drift) == len(report.differences):
            # The engine itself verifies; its dependencies moved. Reinstalling it would let uv
            # change them back (or not) unasked: refused, saying which moved.
            check_installed_gepa(env, previous)
            raise SetupError(
                "install",
                f"{_named(previous)} is installed and verifies, but {len(drift)} fields of its "
                "dependency closure changed since it was recorded; nothing was changed",
                "put the recorded versions back (below), or install into a new environment "
                "(--python NEW --create-env), which records the closure it gets",
                details=[d.describe() for d in drift],
            )
        restored = [d.field for d in report.differences] if report.status == "mismatch" else []
        if report.status == "verified":
            check_installed_gepa(env, previous)
            progress("verify", f"{_named(previous)} is already installed and verified")
            return InstallResult(
                status="unchanged",
                record=previous,
                previous_commit=_commit(previous),
                verify=report,
                repaired=repaired,
                profile_source=profile.source(),
            )
    _guard_bound_experiments(env, previous, bound, again)
    with scratch_dir(WORK_PREFIX) as work, ThreadPoolExecutor(max_workers=2) as pool:
        # Read-only look at the environment (under its lock) while the wheel builds; uv's
        # version, which the record names, is asked meanwhile too (cached for the process).
        before = pool.submit(env.probe, [profile.distribution])
        pool.submit(uv_version)
        artifact = ready or _build(profile, commit, requested_ref, env, work, progress, watch)
        # The checkout is not needed once its wheel is in the store: removing it (~50 ms of
        # rmdir here) overlaps the install; the pool waits for it before the scratch goes.
        pool.submit(shutil.rmtree, work / "src", ignore_errors=True)
        check_wheel_metadata(artifact.meta, profile, extras, before.result().python_version)
        refuse_other_torch(artifact.meta.requires_dist, extras, before.result())
        policy = policy or ClosurePolicy()
        if policy.require_pinned:  # the engine's own requirements, before anything is touched
            refuse_moving(moving_requirements(artifact.meta.requires_dist, extras), "")
        meta = artifact.meta
        progress("check", f"{meta.name} {meta.version} satisfies {profile.requirement}")
        transaction = Transaction(
            env, store, profile, artifact.source, artifact.build, artifact.meta, extras, policy,
            watch=watch,
        )  # fmt: skip
        record, report = transaction.run(artifact.wheel, before.result(), progress)
    return InstallResult(
        status="installed",
        record=record,
        previous_commit=_commit(previous) if previous else None,
        verify=report,
        repaired=repaired,
        restored=restored,
        profile_source=profile.source(),
    )


def _build(
    profile: EngineProfile,
    commit: CommitId | None,
    requested_ref: str | None,
    env: TargetEnv,
    work: Path,
    progress: Progress,
    watch: Watch,
) -> Artifact:
    """Fetch the commit, build its wheel reproducibly and keep it in the store."""
    assert commit is not None
    progress("fetch", f"fetching {commit[:12]} ({profile.subdirectory})")
    fetched = fetch_commit(profile.repository, commit, profile.subdirectory, work / "src", watch)
    progress("build", f"building a wheel with SOURCE_DATE_EPOCH={fetched.commit_time}")
    wheel = build_wheel(
        fetched.source_dir,
        work / "dist",
        fetched.commit_time,
        str(env.interpreter),
        work / "build.log",
        watch,
    )
    progress("build", f"{wheel.path.name} sha256 {wheel.sha256}")
    source = SourceIdentity(
        repository=str(profile.repository),
        subdirectory=profile.subdirectory,
        requested_ref=requested_ref,
        commit=commit,
        subtree_id=fetched.subtree_id,
        commit_time=fetched.commit_time,
    )
    return store_built(wheel, source)


def _commit(record: InstallRecord) -> str | None:
    return record.source.commit if record.source else None


def _named(record: InstallRecord) -> str:
    if record.source is None:
        return f"the reviewed wheel {record.build.wheel_sha256[:12]}"
    return f"commit {record.source.commit[:12]}"


def _same_artifact(previous: InstallRecord, artifact: Artifact, extras: list[str]) -> bool:
    return (
        previous.build.wheel_sha256 == artifact.build.wheel_sha256
        and previous.source == artifact.source
        and previous.install.extras == extras
    )


def _same_source(
    previous: InstallRecord, profile: EngineProfile, commit: str, extras: list[str]
) -> bool:
    return (
        previous.source is not None
        and previous.source.commit == commit
        and previous.source.repository == str(profile.repository)
        and previous.source.subdirectory == profile.subdirectory
        and canonicalize_name(previous.build.distribution) == profile.canonical_distribution
        and SpecifierSet(profile.requirement).contains(previous.build.version, prereleases=True)
        and previous.install.extras == extras
    )


def _guard_bound_experiments(
    env: TargetEnv, previous: InstallRecord | None, bound: BoundExperiments, again: Again
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
            ["install it into a separate environment instead: ", *again],
        )


def repair_environment(python: TargetPath | None, watch: Watch) -> tuple[str, str]:
    """`automl-setup repair`: roll back an interrupted install, if there is one (uv putting
    back the previous dependencies under `watch`'s stall bound).
    Returns (the environment, what was done)."""
    env = locate_for_change(python)
    store = RecordStore(env.state_dir)
    if not env.state_dir.exists():
        return str(env.prefix), f"nothing to repair in {env.prefix}"
    with exclusive_lock(store.lock_path, step="repair", holder=f"environment {env.prefix}"):
        done = recover_interrupted(env, store, watch)
    sweep_stale(WORK_PREFIX)
    return str(env.prefix), done or f"nothing to repair in {env.prefix}"


def history(python: TargetPath | None) -> tuple[list[HistoryEntry], int | None, str]:
    env = locate(python)
    entries, torn = RecordStore(env.state_dir).read_history()
    return entries, torn, str(env.prefix)


def verify(python: TargetPath | None, profile: EngineProfile, deep: bool = False) -> VerifyReport:
    """The environment against its record, then, when every recorded file matches, whether the
    engine starts there at all (an environment whose engine cannot start never reads
    "verified")."""
    env = locate(python)
    report = verify_environment(env, profile.distribution, deep=deep)
    if report.status != "verified":
        return report
    failure = start_failure(env.interpreter, report.distribution)
    if failure is None:
        return report
    note = f"the engine does not start: importing its entry points fails with {failure}"
    return report.model_copy(update={"status": "cannot-start", "notes": [*report.notes, note]})
