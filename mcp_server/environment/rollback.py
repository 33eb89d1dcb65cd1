"""Undoing an install: rollback from its journal, byte for byte, and recovery of an install a
kill left unfinished (found by the next command that takes the environment lock).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name

from mcp_server.children.bound import Watch
from mcp_server.children.uv import run_uv, uv_binary
from mcp_server.environment.precompile import compile_closure
from mcp_server.environment.records import (
    HistoryEntry,
    Journal,
    RecordStore,
    log_installed,
    utc_now,
)
from mcp_server.environment.target import TargetEnv
from mcp_server.environment.verify import installed_paths
from mcp_server.errors import Arg, Fix, SetupError
from mcp_server.redact import redact_text


class RollbackFailed(SetupError):
    """A rollback that could not complete. The journal and the backup stay for `repair`."""

    def __init__(
        self,
        env: TargetEnv,
        store: RecordStore,
        journal: Journal,
        why: str,
        details: list[str],
        cause: SetupError | None = None,
    ) -> None:
        backup = store.transactions / journal.txid / "backup"
        # A cause whose remedy is an argument of the call (a stall: a longer stall_timeout)
        # is fixed by passing it to repair, which takes it too.
        fix = (
            cause.remedy_parts
            if cause and any(isinstance(p, Arg) for p in cause.remedy_parts)
            else ()
        )
        super().__init__(
            "rollback",
            f"the rollback failed (install transaction {journal.txid}): {why}; the previous "
            "engine was not restored",
            [
                f"{env.prefix} is left part-way (verify says interrupted): the previous engine's "
                f"files are in {backup} and the journal {store.journal_path} was kept; fix the "
                "cause",
                *((" (", *fix, ")") if fix else ()),
                ", then run ",
                Fix("repair", (("python", str(env.prefix)),)),
            ],
            details=details,
        )


def _undone(journal: Journal, tense: Literal["was", "is"]) -> str:
    """What a completed rollback achieved, in words."""
    if journal.previous_distribution is None:
        return f"the environment {tense} back to no engine installed"
    return f"the previous engine {tense} restored"


def after_rollback(
    env: TargetEnv, store: RecordStore, journal: Journal, exc: BaseException, watch: Watch
) -> BaseException:
    """Roll back after `exc` and return what to raise: the failure, told with what the
    rollback actually did (composed only now, from its outcome)."""
    detail = exc.message if isinstance(exc, SetupError) else type(exc).__name__
    try:
        rollback(env, store, journal, reason=detail, watch=watch)
    except RollbackFailed as failed:
        if isinstance(exc, SetupError):
            step, cause, details = exc.step, exc.cause, exc.details
        else:
            step, cause, details = "install", f"{type(exc).__name__}: {exc}", []
        return SetupError(
            step, f"{cause}; then {failed.cause}", failed.remedy_parts,
            details=details + failed.details,
        )  # fmt: skip
    if isinstance(exc, SetupError):
        return SetupError(
            exc.step,
            f"{exc.cause}; {_undone(journal, 'was')}",
            exc.remedy,
            exc.exit_code,
            exc.details,
        )
    return exc


def rollback(
    env: TargetEnv, store: RecordStore, journal: Journal, *, reason: str, watch: Watch
) -> None:
    """Put the previous engine back byte for byte and undo dependency changes (uv may fetch
    the previous versions from an index: under `watch`'s stall bound); the journal is removed
    only when all of that worked (RollbackFailed otherwise)."""
    try:
        _undo(env, store, journal, reason, watch)
    except SetupError as exc:
        why = f"{exc.step}: {exc.cause}"
        raise RollbackFailed(env, store, journal, why, exc.details, exc) from None
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise RollbackFailed(env, store, journal, f"{exc.strerror or exc}{where}", []) from None
    finish_transaction(store, journal)


def _undo(env: TargetEnv, store: RecordStore, journal: Journal, reason: str, watch: Watch) -> None:
    txdir = store.transactions / journal.txid
    _refuse_paths_outside(env, store, journal)
    probe = env.probe([journal.distribution])
    current = probe.dists.get(journal.distribution)
    doomed = {Path(p) for p in journal.new_files}
    if current is not None and current.dist_info is not None:
        # A RECORD may name anything; only files inside the environment are ours to remove.
        doomed.update(p for p in installed_paths(current.dist_info) if _inside(p, env.prefix))
    for path in sorted(doomed, reverse=True):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            path.unlink()
        _prune_empty_parents(path.parent, probe.purelib)
    for original, name in journal.backup:
        target = Path(original)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(txdir / "backup" / name, target)
    restored = _restore_dependencies(env, journal, txdir, watch)
    _compile_restored(env, journal.previous_distribution, restored)
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


def _restore_dependencies(env: TargetEnv, journal: Journal, txdir: Path, watch: Watch) -> list[str]:
    """Dependency versions uv changed put back, those it added removed: the names put back."""
    before = journal.versions_before
    now = env.probe([]).versions
    engine = {
        canonicalize_name(name or "")
        for name in (journal.distribution, journal.previous_distribution)
    }
    changed = [
        name
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
        run_uv(
            [*argv, *(f"{name}=={before[name]}" for name in changed)],
            txdir / "uv-restore.log",
            step="rollback",
            watch=watch,
        )
    if added:
        argv = [uv_binary(), "pip", "uninstall", "--python", interpreter]
        run_uv([*argv, *added], txdir / "uv-restore.log", step="rollback", watch=watch)
    return changed


def _compile_restored(env: TargetEnv, engine: str | None, names: list[str]) -> None:
    """Bytecode for the restored packages (the previous engine's files come back from the
    backup, uv reinstalls the dependencies, neither with bytecode), linked from the cache or
    compiled as an install does. Every file is written whole either way, so a compile that
    fails (the full disk that made the install fail) leaves them without and the rollback
    stands."""
    if engine is not None or names:
        with contextlib.suppress(SetupError):
            compile_closure(env.interpreter, env.probe([]), engine or "", names)


def _prune_empty_parents(directory: Path, stop: Path) -> None:
    while directory != stop and stop in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


def finish_transaction(store: RecordStore, journal: Journal) -> None:
    store.journal_path.unlink(missing_ok=True)
    shutil.rmtree(store.transactions / journal.txid, ignore_errors=True)


def recover_interrupted(env: TargetEnv, store: RecordStore, watch: Watch) -> str | None:
    """Called with the environment lock held: finish or roll back (under `watch`'s stall
    bound) a transaction left by a killed install. Returns a one-line account of what was
    done, or None. A damaged journal refuses (RecordStore.journal) before anything is
    touched."""
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
            log_installed(store, record)
        finish_transaction(store, journal)
        return f"install transaction {txid} had completed; its leftovers were removed"
    rollback(env, store, journal, reason=f"interrupted (pid {journal.pid} died)", watch=watch)
    return (
        f"an interrupted install of {journal.distribution} (transaction {txid}, "
        f"{'commit ' + journal.commit[:12] if journal.commit else 'a reviewed wheel'}, "
        f"started {journal.started}) was rolled back; {_undone(journal, 'is')}"
    )
