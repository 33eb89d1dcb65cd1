"""The install transaction inside the environment: backup, journal, `uv pip install`,
`direct_url.json`, verify, record — or, on any failure, roll back.

Nothing in the environment is changed before the journal naming the transaction and a backup of
the previous engine's files is written; from then on a failure (or a kill, found later) rolls
the environment back to the previous engine and record.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp_server import __build__
from mcp_server.children.bound import Watch
from mcp_server.children.uv import run_uv, uv_binary, uv_version
from mcp_server.environment.cachelinks import LINK_MODE, own_copies
from mcp_server.environment.gepa_pin import GEPA, check_gepa
from mcp_server.environment.identity import (
    compute_identity_digest,
    direct_dependency_names,
    environment_info,
)
from mcp_server.environment.memberwheel import (
    keep_members,
    kept_at_install,
    restore_origins,
    set_direct_url,
)
from mcp_server.environment.pins import ClosurePolicy, moving_in_closure, refuse_moving
from mcp_server.environment.precompile import compile_closure
from mcp_server.environment.probe import Probe
from mcp_server.environment.records import (
    BuildIdentity,
    EnvironmentInfo,
    InstallInfo,
    InstallRecord,
    Journal,
    RecordStore,
    SourceIdentity,
    log_installed,
    utc_now,
)
from mcp_server.environment.rollback import after_rollback, finish_transaction
from mcp_server.environment.target import TargetEnv
from mcp_server.environment.torch_guard import check_torch_kept, keep_torch_args
from mcp_server.environment.verify import (
    VerifyReport,
    installed_paths,
    parse_record_csv,
    verify_environment,
)
from mcp_server.errors import SetupError
from mcp_server.fsutil import (
    atomic_write_bytes,
    copy_new_at,
    io_failure,
    new_directory,
    probe_writable,
    state_dir,
    storage_remedy,
)
from mcp_server.pausepoints import pause_at
from mcp_server.source.profile import EngineProfile
from mcp_server.source.wheelbuild import WheelMetadata

Progress = Callable[[str, str], None]  # (step, message)
# The steps of an install, in order (here, not in install.py: the CLI's progress names them).
STEPS = ("resolve", "fetch", "build", "check", "install", "verify", "record")

# Where an install can be stopped by the crash tests (pausepoints.py).
PAUSE_POINTS = ("journal-written", "uv-installed", "direct-url-written", "record-written")


class Transaction:
    """Backup, journal, uv install, direct_url.json, verify, record — or roll back."""

    def __init__(
        self,
        env: TargetEnv,
        store: RecordStore,
        profile: EngineProfile,
        source: SourceIdentity | None,
        build: BuildIdentity,
        meta: WheelMetadata,
        extras: list[str],
        policy: ClosurePolicy | None = None,
        *,
        watch: Watch,
    ) -> None:
        """`watch`: the stall bound of uv's fetches (and of a rollback's)."""
        self.env, self.store, self.profile, self.watch = env, store, profile, watch
        self.source, self.build, self.meta, self.extras = source, build, meta, extras
        self.policy = policy or ClosurePolicy()
        self.txid = uuid.uuid4().hex[:12]
        self.txdir = store.transactions / self.txid

    def run(
        self, wheel: Path, before: Probe, progress: Progress
    ) -> tuple[InstallRecord, VerifyReport]:
        """`before` is a probe of the environment taken under its lock, before any change."""
        _require_writable(self._directories_written(before))
        journal = self._begin(before)
        try:
            pause_at("journal-written")
            progress("install", f"uv pip install {wheel.name} into {self.env.prefix}")
            self._uv_install(wheel, before)
            pause_at("uv-installed")
            self._write_direct_url(before.purelib / self.meta.dist_info, wheel)
            restore_origins([before.purelib, before.platlib], self.policy.from_store)
            pause_at("direct-url-written")
            progress("verify", "checking direct_url.json, RECORD hashes and the identity digest")
            after = self.env.probe([self.build.distribution])
            check_torch_kept(before, after)
            gepa = after.versions.get(GEPA)
            check_gepa(self.meta.requires_dist, self.extras, gepa, self.env.prefix)
            record = self._make_record(after)
            self._compile(record, after, progress)
            if self.policy.require_pinned and record.closure:
                refuse_moving(moving_in_closure(record.closure), " of the dependency closure")
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
                    details=[d.describe("built") for d in report.differences],
                )
            self._keep_members(record, after, progress)
            progress("record", f"writing {self.store.record_path}")
            self.store.write_record(record)
            pause_at("record-written")
        except BaseException as exc:
            told = after_rollback(self.env, self.store, journal, exc, self.watch)
            if told is exc:
                raise
            raise told from None
        log_installed(self.store, record)
        finish_transaction(self.store, journal)
        return record, report

    def _compile(self, record: InstallRecord, after: Probe, progress: Progress) -> None:
        """Bytecode for the engine and its closure, once, here: nothing writes any at run time
        (precompile.py)."""
        names = list(record.closure or {})
        progress("verify", f"compiling the bytecode of {len(names) + 1} distributions")
        done = compile_closure(self.env.interpreter, after, self.build.distribution, names)
        progress("verify", done.describe())

    def _keep_members(self, record: InstallRecord, after: Probe, progress: Progress) -> None:
        """The closure members no index gives again (VCS commits, URLs) go into the store,
        where `recreate` finds them with no repository or index."""
        names = kept_at_install(record.closure or {})
        if not names:
            return
        progress(
            "record", f"keeping {len(names)} dependency wheels in the store: {', '.join(names)}"
        )
        site = [after.purelib, after.platlib]
        keep_members(record.closure or {}, names, site, after.prefix, self.txdir / "members")

    def _directories_written(self, before: Probe) -> list[Path]:
        """Where uv will create, replace or remove files: site-packages, the scripts directory
        and every directory of the previous engine's files."""
        dirs = {before.purelib, before.scripts}
        previous = before.dists.get(self.profile.distribution)
        if previous is not None and previous.dist_info is not None:
            dirs.update(p.parent for p in installed_paths(previous.dist_info) if p.is_file())
        return sorted(dirs)

    def _begin(self, before: Probe) -> Journal:
        """Back up the previous engine's files, then write the journal that makes it undoable.
        A failure before the journal is written removes the partial backup: nothing changed."""
        previous = before.dists.get(self.profile.distribution)
        backup_dir = self.txdir / "backup"
        try:
            new_directory(backup_dir)
            saved: list[list[str]] = []
            if previous is not None and previous.dist_info is not None:
                with state_dir(backup_dir, step="back up") as backup:
                    for index, path in enumerate(installed_paths(previous.dist_info)):
                        if path.is_file():
                            name = f"{index:06d}"
                            mode = stat.S_IMODE(path.stat().st_mode)
                            copy_new_at(backup, backup_dir / name, path, step="back up", mode=mode)
                            saved.append([str(path), name])
            journal = Journal(
                txid=self.txid,
                pid=os.getpid(),
                started=utc_now(),
                commit=self.source.commit if self.source else None,
                requested_ref=self.source.requested_ref if self.source else None,
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

    def _uv_install(self, wheel: Path, before: Probe) -> None:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        requirement = f"{self.build.distribution}{extras} @ {wheel.resolve().as_uri()}"
        argv = [
            uv_binary(),
            "pip",
            "install",
            "--no-progress",
            # The dependencies share their bytes with uv's cache (copying them was most of an
            # install with heavy ones); the engine's own files get copies below.
            "--link-mode",
            LINK_MODE,
            "--python",
            str(self.env.interpreter),
        ]
        argv += keep_torch_args(before, self.txdir)
        if self.policy.overrides:  # recreate: each bound member at its bound version or commit
            pinned = self.txdir / "closure-overrides.txt"
            atomic_write_bytes(pinned, "".join(f"{o}\n" for o in self.policy.overrides).encode())
            argv += ["--override", str(pinned)]
        argv += ["--reinstall-package", self.build.distribution, requirement]
        log = self.txdir / "uv-install.log"
        run_uv(argv, log, step="install", watch=self.watch, requires_dist=self.meta.requires_dist)
        # An engine file edited in place must never edit uv's cache (a reinstall would bring
        # the edit back): its linked files become files of their own before anything reads them.
        dist_info = before.purelib / self.meta.dist_info
        try:
            own_copies(installed_paths(dist_info), before.prefix)
        except OSError as exc:
            raise SetupError(
                "install",
                f"cannot copy the engine file {exc.filename} apart from uv's cache "
                f"({exc.strerror or exc})",
                "free space in the environment's file system or make it writable, then run the "
                "install again",
            ) from None

    def _write_direct_url(self, dist_info: Path, wheel: Path) -> None:
        """PEP 610 direct_url.json naming the repository, commit and subdirectory (uv wrote
        one for the local wheel file), or for a reviewed wheel the wheel and its sha256, and
        the matching RECORD line."""
        if not (dist_info / "RECORD").is_file():
            raise SetupError(
                "install",
                f"uv reported success but {dist_info} is missing",
                "run the install again; if it repeats, report it with the uv log",
            )
        set_direct_url(dist_info, self._direct_url(wheel))

    def _direct_url(self, wheel: Path) -> dict[str, Any]:
        if self.source is None:
            sha = self.build.wheel_sha256
            return {
                "url": wheel.resolve().as_uri(),
                "archive_info": {"hash": f"sha256={sha}", "hashes": {"sha256": sha}},
            }
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
        return direct_url

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
        closure = probe.closure(self.build.distribution, self.extras)
        install = InstallInfo(
            interpreter=str(self.env.interpreter),
            environment=str(self.env.prefix),
            installer="uv",
            installer_version=uv_version(),
            tool_version=__build__,
            extras=self.extras,
            transaction=self.txid,
            time=utc_now(),
        )
        return InstallRecord(
            origin="reviewed-wheel" if self.source is None else "source-build",
            source=self.source,
            build=self.build,
            install=install,
            environment=environment,
            identity_digest=compute_identity_digest(self.source, self.build, environment, closure),
            closure=closure,
        )


def _require_writable(directories: list[Path]) -> None:
    """Refuse before the backup and journal if uv could not write where it must: a failed uv
    there would leave a rollback that cannot write either. os.access is not enough (root, a
    read-only mount, an immutable directory), so a probe file is created and removed."""
    for directory in directories:
        try:
            probe_writable(directory)
        except OSError as exc:
            raise SetupError(
                "install",
                f"{directory} is not writable ({exc.strerror or exc}); nothing was changed",
                storage_remedy(exc.errno, directory)
                or "make it writable (permissions, a read-only mount, `lsattr -d` for the "
                "immutable attribute), or install into an environment you can write: --python "
                "NEW --create-env",
            ) from None
