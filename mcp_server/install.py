"""The install transaction: resolve -> fetch -> build -> check -> install -> verify -> record.

Nothing in the target environment is touched before the wheel is built and checked. From then
on a journal in `<prefix>/.automl-setup/journal.json` names the transaction and a backup of the
previous engine's files; any failure, and a SIGKILL found later by the next command, rolls the
environment back to the previous engine and record, byte for byte.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel

from mcp_server import __version__
from mcp_server.build import (
    WheelMetadata,
    build_wheel,
    check_wheel_metadata,
    read_wheel_metadata,
    record_hash,
    run_logged,
    uv_binary,
    uv_version,
)
from mcp_server.errors import InvalidInput, SetupError
from mcp_server.fsutil import atomic_write_bytes, exclusive_lock, io_failure
from mcp_server.gitsource import (
    fetch_commit,
    resolve_branch,
    validate_branch,
    validate_commit,
    validate_extra,
)
from mcp_server.profile import EngineProfile
from mcp_server.provenance import (
    BuildIdentity,
    EnvironmentInfo,
    HistoryEntry,
    InstallInfo,
    InstallRecord,
    Journal,
    RecordStore,
    SourceIdentity,
    VerifyReport,
    compute_identity_digest,
    direct_dependency_names,
    environment_info,
    parse_record_csv,
    utc_now,
    verify_environment,
)
from mcp_server.redact import redact_text, strip_credentials
from mcp_server.scratch import scratch_dir, sweep_stale
from mcp_server.targetenv import Probe, TargetEnv, locate, locate_for_change, open_for_install

STEPS = ("resolve", "fetch", "build", "check", "install", "verify", "record")
UV_TIMEOUT_S = 1800.0
WORK_PREFIX = "automl-setup-work-"

Progress = Callable[[str, str], None]  # (step, message)

# Fault injection for the crash tests: with AUTOML_SETUP_PAUSE_AT=<point> the install stops at
# that point, says so in the file named by AUTOML_SETUP_PAUSE_FILE, and waits to be killed, or
# with AUTOML_SETUP_PAUSE_SECONDS=<s> only that long and then carries on (a slow install).
PAUSE_POINTS = ("journal-written", "uv-installed", "direct-url-written", "record-written")


def _checkpoint(point: str) -> None:
    if os.environ.get("AUTOML_SETUP_PAUSE_AT") != point:
        return
    marker = os.environ.get("AUTOML_SETUP_PAUSE_FILE")
    if marker:
        Path(marker).write_text(point, encoding="utf-8")
    seconds = os.environ.get("AUTOML_SETUP_PAUSE_SECONDS")
    if seconds:
        time.sleep(float(seconds))
        return
    while True:
        time.sleep(3600)


def no_progress(step: str, message: str) -> None:
    """Default progress sink."""


@dataclass(frozen=True)
class InstallRequest:
    profile: EngineProfile
    python: str | None
    branch: str | None = None
    commit: str | None = None
    create_env: bool = False
    extras: list[str] = field(default_factory=list)


class InstallResult(BaseModel):
    status: Literal["installed", "unchanged"]
    record: InstallRecord
    previous_commit: str | None
    verify: VerifyReport
    repaired: str | None = None


def validate_request(request: InstallRequest) -> tuple[str | None, str | None, list[str]]:
    """All user values checked before anything runs: (branch, commit, extras)."""
    if request.branch is not None and request.commit is not None:
        raise InvalidInput(
            "validate", "both a branch and a commit were given", "pass either --branch or --commit"
        )
    branch = validate_branch(request.branch) if request.branch is not None else None
    commit = validate_commit(request.commit) if request.commit is not None else None
    if branch is None and commit is None:
        raise InvalidInput(
            "validate",
            "no branch or commit given",
            "ask the user: main, or which development branch? then pass --branch NAME",
        )
    extras = sorted({validate_extra(e) for e in request.extras})
    return branch, commit, extras


def install_engine(request: InstallRequest, progress: Progress = no_progress) -> InstallResult:
    branch, commit, extras = validate_request(request)
    # The environment lock is held from before a new environment (--create-env) is usable;
    # a failure removes exactly what this call created.
    with open_for_install(request.python, create=request.create_env) as env:
        return _install_locked(request.profile, env, branch, commit, extras, progress)


def _install_locked(
    profile: EngineProfile,
    env: TargetEnv,
    branch: str | None,
    commit: str | None,
    extras: list[str],
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
    _guard_bound_experiments(env, previous)
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
            repository=strip_credentials(profile.repository),
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
        and previous.source.repository == strip_credentials(profile.repository)
        and previous.source.subdirectory == profile.subdirectory
        and canonicalize_name(previous.build.distribution) == profile.canonical_distribution
        and SpecifierSet(profile.requirement).contains(previous.build.version, prereleases=True)
        and previous.install.extras == extras
    )


def _guard_bound_experiments(env: TargetEnv, previous: InstallRecord | None) -> None:
    """Rule 5: no different engine in place under unfinished experiments bound to this one."""
    if previous is None:
        return
    from mcp_server.registry import unfinished_experiments

    unfinished = unfinished_experiments(env.state_dir)
    if unfinished:
        names = ", ".join(f"{e.experiment_id} ({e.workspace})" for e in unfinished)
        raise SetupError(
            "install",
            f"unfinished experiments are bound to the engine in {env.prefix}: {names}",
            "install the new engine into a separate environment (--python NEW --create-env)",
        )


# --------------------------------------------------------------------------------------------
# The transaction inside the environment


class Transaction:
    """Backup, journal, uv install, direct_url.json, verify, record — or roll back."""

    def __init__(
        self,
        env: TargetEnv,
        store: RecordStore,
        profile: EngineProfile,
        source: SourceIdentity,
        build: BuildIdentity,
        meta: WheelMetadata,
        extras: list[str],
    ) -> None:
        self.env, self.store, self.profile = env, store, profile
        self.source, self.build, self.meta, self.extras = source, build, meta, extras
        self.txid = uuid.uuid4().hex[:12]
        self.txdir = store.transactions / self.txid

    def run(
        self, wheel: Path, before: Probe, progress: Progress
    ) -> tuple[InstallRecord, VerifyReport]:
        """`before` is a probe of the environment taken under its lock, before any change."""
        _require_writable(self._directories_written(before))
        journal = self._begin(before)
        try:
            _checkpoint("journal-written")
            progress("install", f"uv pip install {wheel.name} into {self.env.prefix}")
            self._uv_install(wheel)
            _checkpoint("uv-installed")
            self._write_direct_url(before.purelib / self.meta.dist_info)
            _checkpoint("direct-url-written")
            progress("verify", "checking direct_url.json, RECORD hashes and the identity digest")
            after = self.env.probe([self.build.distribution])
            record = self._make_record(after)
            self.store.store_wheel_record(self.meta.record_text)
            report = verify_environment(
                self.env, self.build.distribution, pending=record, probe=after
            )
            if report.status != "verified":
                raise SetupError(
                    "verify",
                    f"the installed engine does not match what was built ({len(report.differences)}"
                    " differences)",
                    "report this: the installer changed files it was asked to install",
                    details=[
                        f"{d.field}: built {d.recorded}, found {d.found}"
                        for d in report.differences
                    ],
                )
            progress("record", f"writing {self.store.record_path}")
            self.store.write_record(record)
            _checkpoint("record-written")
        except BaseException as exc:
            told = _after_rollback(self.env, self.store, journal, exc)
            if told is exc:
                raise
            raise told from None
        _record_installed(self.store, record)
        _finish(self.store, journal)
        return record, report

    def _directories_written(self, before: Probe) -> list[Path]:
        """Where uv will create, replace or remove files: site-packages, the scripts directory
        and every directory of the previous engine's files."""
        dirs = {before.purelib, before.scripts}
        previous = before.dists.get(self.profile.distribution)
        if previous is not None and previous.dist_info is not None:
            dirs.update(p.parent for p in _installed_paths(previous.dist_info) if p.is_file())
        return sorted(dirs)

    def _begin(self, before: Probe) -> Journal:
        """Back up the previous engine's files, then write the journal that makes it undoable.
        A failure before the journal is written removes the partial backup: nothing changed."""
        previous = before.dists.get(self.profile.distribution)
        backup_dir = self.txdir / "backup"
        try:
            backup_dir.mkdir(parents=True)
            saved: list[list[str]] = []
            if previous is not None and previous.dist_info is not None:
                for index, path in enumerate(_installed_paths(previous.dist_info)):
                    if path.is_file():
                        name = f"{index:06d}"
                        shutil.copy2(path, backup_dir / name)
                        saved.append([str(path), name])
            journal = Journal(
                txid=self.txid,
                pid=os.getpid(),
                started=utc_now(),
                commit=self.source.commit,
                requested_ref=self.source.requested_ref,
                distribution=self.build.distribution,
                previous_distribution=previous.name if previous is not None else None,
                backup=saved,
                versions_before=before.versions,
                # Stored before verify (which reads it); a rollback removes it if it is new.
                new_wheel_record=None
                if self.store.wheel_record_path(self.meta.record_digest).exists()
                else self.meta.record_digest,
                new_files=[
                    str(before.purelib / p)
                    for p, _h, _s in parse_record_csv(self.meta.record_text)
                    if ".data/" not in p
                ],
            )
            atomic_write_bytes(self.store.journal_path, journal.model_dump_json(indent=1).encode())
        except BaseException as exc:
            # Nothing of the environment was touched yet; leave nothing of this call behind.
            shutil.rmtree(self.txdir, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.store.journal_path.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise io_failure("back up", backup_dir, exc) from None
            raise
        return journal

    def _uv_install(self, wheel: Path) -> None:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        requirement = f"{self.build.distribution}{extras} @ {wheel.resolve().as_uri()}"
        argv = [
            uv_binary(),
            "pip",
            "install",
            "--no-progress",
            "--python",
            str(self.env.interpreter),
        ]
        argv += ["--reinstall-package", self.build.distribution, requirement]
        _run_uv(argv, self.txdir / "uv-install.log", step="install")

    def _write_direct_url(self, dist_info: Path) -> None:
        """PEP 610 direct_url.json naming the repository, commit and subdirectory (uv wrote
        one for the local wheel file), and the matching RECORD line."""
        if not (dist_info / "RECORD").is_file():
            raise SetupError(
                "install",
                f"uv reported success but {dist_info} is missing",
                "run the install again; if it repeats, report it with the uv log",
            )
        direct_url: dict[str, Any] = {
            "url": self.source.repository,
            "vcs_info": {"vcs": "git", "commit_id": self.source.commit},
        }
        if self.source.requested_ref:
            direct_url["vcs_info"]["requested_revision"] = self.source.requested_ref.removeprefix(
                "refs/heads/"
            )
        if self.source.subdirectory != ".":
            direct_url["subdirectory"] = self.source.subdirectory
        data = json.dumps(direct_url, sort_keys=True).encode()
        atomic_write_bytes(dist_info / "direct_url.json", data)
        record_path = dist_info / "RECORD"
        rel = f"{dist_info.name}/direct_url.json"
        rows = [r for r in parse_record_csv(record_path.read_text("utf-8")) if r[0] != rel]
        rows.append((rel, record_hash(data), str(len(data))))
        text = "".join(f"{p},{h},{s}\n" for p, h, s in rows)
        atomic_write_bytes(record_path, text.encode("utf-8"))

    def _make_record(self, probe: Probe) -> InstallRecord:
        installed = probe.dists.get(self.build.distribution)
        if installed is None:
            raise SetupError(
                "install",
                "uv reported success but the engine is not installed",
                "run the install again; if it repeats, report it with the uv log",
            )
        environment: EnvironmentInfo = environment_info(
            probe, direct_dependency_names(installed.requires, self.extras)
        )
        install = InstallInfo(
            interpreter=str(self.env.interpreter),
            environment=str(self.env.prefix),
            installer="uv",
            installer_version=uv_version(),
            tool_version=__version__,
            extras=self.extras,
            transaction=self.txid,
            time=utc_now(),
        )
        return InstallRecord(
            source=self.source,
            build=self.build,
            install=install,
            environment=environment,
            identity_digest=compute_identity_digest(self.source, self.build, environment),
        )


def _record_installed(store: RecordStore, record: InstallRecord) -> None:
    store.append_history(
        HistoryEntry(
            time=record.install.time,
            event="installed",
            transaction=record.install.transaction,
            commit=record.source.commit,
            requested_ref=record.source.requested_ref,
            distribution=record.build.distribution,
            version=record.build.version,
            identity_digest=record.identity_digest,
            wheel_sha256=record.build.wheel_sha256,
        )
    )


def _installed_paths(dist_info: Path) -> list[Path]:
    record = dist_info / "RECORD"
    if not record.exists():
        return []
    root = dist_info.parent
    paths = [Path(os.path.normpath(root / p)) for p, _h, _s in parse_record_csv(record.read_text())]
    return sorted(set(paths))


def _require_writable(directories: list[Path]) -> None:
    """Refuse before the backup and journal if uv could not write where it must: a failed uv
    there would leave a rollback that cannot write either. os.access is not enough (root, a
    read-only mount, an immutable directory), so a probe file is created and removed."""
    for directory in directories:
        probe = directory / f".automl-setup-probe-{os.getpid()}"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            probe.unlink()
        except OSError as exc:
            raise SetupError(
                "install",
                f"{directory} is not writable ({exc.strerror or exc}); nothing was changed",
                "make it writable (permissions, a read-only mount, `lsattr -d` for the immutable "
                "attribute), or install into an environment you can write: --python NEW "
                "--create-env",
            ) from None


def _run_uv(argv: list[str], log_path: Path, *, step: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    returncode = run_logged(argv, log_path, step=step, env=env, timeout=UV_TIMEOUT_S)
    if returncode != 0:
        lines = log_path.read_text("utf-8", errors="replace").splitlines()
        raise SetupError(
            step,
            f"uv exited with status {returncode}",
            "see the uv messages below; fix the cause (network, disk, dependency conflict) "
            "and run the install again",
            details=[redact_text(line) for line in lines[-10:]],
        )


# --------------------------------------------------------------------------------------------
# Rollback and recovery


class RollbackFailed(SetupError):
    """A rollback that could not complete. The journal and the backup stay for `repair`."""

    def __init__(
        self, env: TargetEnv, store: RecordStore, journal: Journal, why: str, details: list[str]
    ) -> None:
        backup = store.transactions / journal.txid / "backup"
        super().__init__(
            "rollback",
            f"the rollback failed (install transaction {journal.txid}): {why}; the previous "
            "engine was not restored",
            f"{env.prefix} is left part-way (verify says interrupted): the previous engine's "
            f"files are in {backup} and the journal {store.journal_path} was kept; fix the "
            f"cause, then run `automl-setup repair --python {env.prefix}`",
            details=details,
        )


def _undone(journal: Journal, tense: Literal["was", "is"]) -> str:
    """What a completed rollback achieved, in words."""
    if journal.previous_distribution is None:
        return f"the environment {tense} back to no engine installed"
    return f"the previous engine {tense} restored"


def _after_rollback(
    env: TargetEnv, store: RecordStore, journal: Journal, exc: BaseException
) -> BaseException:
    """Roll back after `exc` and return what to raise: the failure, told with what the
    rollback actually did (composed only now, from its outcome)."""
    detail = exc.message if isinstance(exc, SetupError) else type(exc).__name__
    try:
        rollback(env, store, journal, reason=detail)
    except RollbackFailed as failed:
        if isinstance(exc, SetupError):
            step, cause, details = exc.step, exc.cause, exc.details
        else:
            step, cause, details = "install", f"{type(exc).__name__}: {exc}", []
        return SetupError(
            step, f"{cause}; then {failed.cause}", failed.remedy, details=details + failed.details
        )
    if isinstance(exc, SetupError):
        return SetupError(
            exc.step,
            f"{exc.cause}; {_undone(journal, 'was')}",
            exc.remedy,
            exc.exit_code,
            exc.details,
        )
    return exc


def rollback(env: TargetEnv, store: RecordStore, journal: Journal, *, reason: str) -> None:
    """Put the previous engine back byte for byte and undo dependency changes; the journal is
    removed only when all of that worked (RollbackFailed otherwise)."""
    try:
        _undo(env, store, journal, reason)
    except SetupError as exc:
        raise RollbackFailed(env, store, journal, f"{exc.step}: {exc.cause}", exc.details) from None
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise RollbackFailed(env, store, journal, f"{exc.strerror or exc}{where}", []) from None
    _finish(store, journal)


def _undo(env: TargetEnv, store: RecordStore, journal: Journal, reason: str) -> None:
    txdir = store.transactions / journal.txid
    _refuse_paths_outside(env, store, journal)
    probe = env.probe([journal.distribution])
    current = probe.dists.get(journal.distribution)
    doomed = {Path(p) for p in journal.new_files}
    if current is not None and current.dist_info is not None:
        # A RECORD may name anything; only files inside the environment are ours to remove.
        doomed.update(p for p in _installed_paths(current.dist_info) if _inside(p, env.prefix))
    for path in sorted(doomed, reverse=True):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            path.unlink()
        _prune_empty_parents(path.parent, probe.purelib)
    for original, name in journal.backup:
        target = Path(original)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(txdir / "backup" / name, target)
    _restore_dependencies(env, journal, txdir)
    if journal.new_wheel_record:
        store.wheel_record_path(journal.new_wheel_record).unlink(missing_ok=True)
    store.append_history(
        HistoryEntry(
            time=utc_now(),
            event="rolled-back",
            transaction=journal.txid,
            commit=journal.commit,
            requested_ref=journal.requested_ref,
            distribution=journal.distribution,
            detail=redact_text(reason)[:500],
        )
    )


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.normpath(path)).is_relative_to(root)


def _refuse_paths_outside(env: TargetEnv, store: RecordStore, journal: Journal) -> None:
    """A journal that names a file outside the environment (or a backup name that is not a
    plain file name) was not written by automl-setup: undo nothing it says."""
    outside = [p for p in journal.new_files if not _inside(Path(p), env.prefix)]
    outside += [o for o, _n in journal.backup if not _inside(Path(o), env.prefix)]
    outside += [n for _o, n in journal.backup if not n.isdigit()]
    if outside:
        raise SetupError(
            "repair",
            f"the install journal {store.journal_path} names {len(outside)} path(s) outside "
            f"{env.prefix} (first: {outside[0]!r}); it was not written by automl-setup, so "
            "nothing was changed",
            f"inspect it and the backup in {store.transactions / journal.txid}, then restore "
            "the environment by hand or reinstall into a fresh one",
        )


def _restore_dependencies(env: TargetEnv, journal: Journal, txdir: Path) -> None:
    before = journal.versions_before
    now = env.probe([]).versions
    engine = {
        canonicalize_name(name or "")
        for name in (journal.distribution, journal.previous_distribution)
    }
    changed = [
        f"{name}=={version}"
        for name, version in sorted(before.items())
        if name not in engine and now.get(name) != version
    ]
    added = sorted(name for name in now if name not in before and name not in engine)
    interpreter = str(env.interpreter)
    if changed:
        argv = [
            uv_binary(),
            "pip",
            "install",
            "--no-progress",
            "--no-deps",
            "--python",
            interpreter,
        ]
        _run_uv([*argv, *changed], txdir / "uv-restore.log", step="rollback")
    if added:
        argv = [uv_binary(), "pip", "uninstall", "--python", interpreter]
        _run_uv([*argv, *added], txdir / "uv-restore.log", step="rollback")


def _prune_empty_parents(directory: Path, stop: Path) -> None:
    while directory != stop and stop in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


def _finish(store: RecordStore, journal: Journal) -> None:
    store.journal_path.unlink(missing_ok=True)
    shutil.rmtree(store.transactions / journal.txid, ignore_errors=True)


def recover_interrupted(env: TargetEnv, store: RecordStore) -> str | None:
    """Called with the environment lock held: finish or roll back a transaction left by a
    killed install. Returns a one-line account of what was done, or None. A damaged journal
    refuses (RecordStore.journal) before anything is touched."""
    journal = store.journal()
    txid = journal.txid if journal else None
    # A kill before the journal was written leaves only a backup nobody needs.
    for stale in store.transactions.glob("*") if store.transactions.is_dir() else []:
        if stale.name != txid:
            shutil.rmtree(stale, ignore_errors=True)
    if journal is None:
        return None
    record = store.read_record()
    if record is not None and record.install.transaction == txid:
        # Killed after the record was written: the install completed; log it and tidy up.
        entries, _torn = store.read_history()
        if not entries or entries[-1].transaction != txid:
            _record_installed(store, record)
        _finish(store, journal)
        return f"install transaction {txid} had completed; its leftovers were removed"
    rollback(env, store, journal, reason=f"interrupted (pid {journal.pid} died)")
    return (
        f"an interrupted install (transaction {txid}, commit {journal.commit[:12]}, "
        f"started {journal.started}) was rolled back; {_undone(journal, 'is')}"
    )


def repair_environment(python: str | None) -> str:
    """`automl-setup repair`: roll back an interrupted install, if there is one."""
    env = locate_for_change(python)
    store = RecordStore(env.state_dir)
    if not env.state_dir.exists():
        return f"nothing to repair in {env.prefix}"
    with exclusive_lock(store.lock_path, step="repair", holder=f"environment {env.prefix}"):
        done = recover_interrupted(env, store)
    sweep_stale(WORK_PREFIX)
    return done or f"nothing to repair in {env.prefix}"


def history(python: str | None) -> tuple[list[HistoryEntry], int | None, str]:
    env = locate(python)
    entries, torn = RecordStore(env.state_dir).read_history()
    return entries, torn, str(env.prefix)


def verify(python: str | None, profile: EngineProfile) -> VerifyReport:
    env = locate(python)
    return verify_environment(env, profile.distribution)
