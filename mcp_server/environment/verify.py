"""Verification: the installed engine against its record, file by file, and an install that
is still running or was interrupted told apart from either.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field

from mcp_server.environment.bytecode import bytecode_diffs, remove_command, stray_bytecode
from mcp_server.environment.cachelinks import restore_commands
from mcp_server.environment.closure import Closure, dist_info_dir
from mcp_server.environment.identity import (
    CLOSURE_NOT_RECORDED,
    closure_differences,
    compute_identity_digest,
    diff_fields,
    environment_info,
)
from mcp_server.environment.probe import Probe
from mcp_server.environment.records import (
    BuildIdentity,
    FieldDiff,
    InstallRecord,
    RecordStore,
    SourceIdentity,
)
from mcp_server.environment.target import TargetEnv
from mcp_server.environment.uvproject import removed_by_sync
from mcp_server.errors import ExitCode, SetupError
from mcp_server.fsutil import exclusive_holder, read_file
from mcp_server.persisted import Persisted
from mcp_server.source.wheelbuild import record_hash

VerifyStatus = Literal[
    "verified", "mismatch", "cannot-start", "no-engine", "no-record", "in-progress", "interrupted"
]


class VerifyReport(Persisted):
    status: VerifyStatus = Field(description="What the check found: verified, or what not.")
    environment: str = Field(description="sys.prefix of the environment checked.")
    distribution: str = Field(description="The engine's distribution name.")
    commit: str | None = Field(None, description="The recorded commit, when there is a record.")
    requested_ref: str | None = Field(None, description="The ref that commit was installed from.")
    version: str | None = Field(None, description="The recorded version of the engine.")
    identity_digest: str | None = Field(None, description="The recorded identity digest.")
    files_checked: int = Field(0, description="Files whose RECORD hash was checked on disk.")
    differences: list[FieldDiff] = Field(
        default_factory=list, description="Every field that differs from the record."
    )
    notes: list[str] = Field(default_factory=list, description="Anything else worth knowing.")
    watched: dict[str, str | None] = Field(
        default_factory=dict,
        description="Versions of the watched packages (gepa, torch) found now; null if absent.",
    )
    restore_commands: list[str] = Field(
        default_factory=list,
        description="With deep: the commands, in order, that remove the engine's bytecode that "
        "is not compiled from its source, and restore the dependencies whose files were edited, "
        "in the environment and in uv's cache (a file linked from the cache is edited there "
        "too).",
    )

    @property
    def exit_code(self) -> ExitCode:
        if self.status == "verified":
            return ExitCode.OK
        if self.status in ("no-engine", "no-record"):
            return ExitCode.NOTHING_INSTALLED
        return ExitCode.REFUSED


def parse_record_csv(text: str) -> list[tuple[str, str, str]]:
    return [(row[0], row[1], row[2]) for row in csv.reader(io.StringIO(text)) if len(row) >= 3]


def installed_paths(dist_info: Path) -> list[Path]:
    """Every file an installed distribution's RECORD names (none without a RECORD)."""
    record = dist_info / "RECORD"
    if not record.exists():
        return []
    root = dist_info.parent
    paths = [Path(os.path.normpath(root / p)) for p, _h, _s in parse_record_csv(record.read_text())]
    return sorted(set(paths))


def check_direct_url(
    raw: str | None, source: SourceIdentity | None, build: BuildIdentity
) -> list[FieldDiff]:
    if raw is None:
        return [FieldDiff(field="direct_url.json", recorded="present", found="missing")]
    try:
        data = json.loads(raw)
    except ValueError:
        return [FieldDiff(field="direct_url.json", recorded="valid JSON", found="unparsable")]
    if not isinstance(data, dict):
        return [FieldDiff(field="direct_url.json", recorded="an object", found=type(data).__name__)]
    if source is None:  # a reviewed wheel: named by its archive hash, never by git fields
        hashes = (data.get("archive_info") or {}).get("hashes") or {}
        found = {
            "build.wheel_sha256": hashes.get("sha256"),
            "direct_url.vcs_info": "present" if "vcs_info" in data else None,
        }
        return diff_fields({"build.wheel_sha256": build.wheel_sha256}, found)
    vcs = data.get("vcs_info") or {}
    found = {
        "source.repository": data.get("url"),
        "source.commit": vcs.get("commit_id"),
        "source.subdirectory": data.get("subdirectory") or ".",
        "direct_url.vcs": vcs.get("vcs"),
    }
    recorded = {
        "source.repository": source.repository,
        "source.commit": source.commit,
        "source.subdirectory": source.subdirectory,
        "direct_url.vcs": "git",
    }
    return diff_fields(recorded, found)


def check_installed_files(dist_info: Path) -> tuple[int, list[FieldDiff], dict[str, str]]:
    """Every file RECORD lists with a hash must hash the same on disk."""
    root = dist_info.parent
    record_file = dist_info / "RECORD"
    if not record_file.exists():
        return 0, [FieldDiff(field="RECORD", recorded="present", found="missing")], {}
    rows = parse_record_csv(record_file.read_text(encoding="utf-8"))
    diffs, hashes, checked = [], {}, 0
    for path, expected, _size in rows:
        if not expected:
            continue
        hashes[path] = expected
        target = Path(os.path.normpath(root / path))
        checked += 1
        try:
            actual = record_hash(target.read_bytes())
        except OSError:
            actual = "missing"
        if actual != expected:
            diffs.append(FieldDiff(field=f"file {path}", recorded=expected, found=actual))
    return checked, diffs, hashes


def check_wheel_files(
    store: RecordStore, build: BuildIdentity, installed: dict[str, str]
) -> list[FieldDiff]:
    """The installed RECORD must carry every file of the wheel that was built, unchanged."""
    path = store.wheel_record_path(build.record_digest)
    try:
        data = read_file(path)
    except SetupError:
        data = None
    if data is None:
        return [FieldDiff(field="build.record_digest", recorded=build.record_digest, found=None)]
    found_digest = hashlib.sha256(data).hexdigest()
    if found_digest != build.record_digest:
        return [
            FieldDiff(field="build.record_digest", recorded=build.record_digest, found=found_digest)
        ]
    diffs = []
    for name, expected, _size in parse_record_csv(data.decode("utf-8")):
        if not expected or ".data/" in name:  # installers relocate .data entries
            continue
        if installed.get(name) != expected:
            diffs.append(
                FieldDiff(field=f"wheel file {name}", recorded=expected, found=installed.get(name))
            )
    return diffs


# The `/bin/sh` trampoline installers write when a shebang is too long or has spaces (uv, pip);
# a relocatable script names its interpreter relative to its own directory.
_TRAMPOLINE = re.compile(
    r"""'''exec' (?P<relative>"\$\(dirname -- "\$\(realpath -- "\$0"\)"\)"/)?"""
    r"""(?P<exe>'(?:[^']|'\\'')*'|"[^"]*"|\S+) "\$0" "\$@"\s*"""
)


def _script_interpreter(script: Path) -> str | None:
    """The interpreter a console script starts (None: not a script with a shebang)."""
    try:
        with script.open("rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!") or not head[0][2:].split():
        return None
    first = head[0][2:].split()[0]
    match = _TRAMPOLINE.fullmatch(head[1]) if first == "/bin/sh" and len(head) > 1 else None
    if match is None:
        return first
    exe = match["exe"]
    if exe[0] == "'":
        exe = exe[1:-1].replace("'\\''", "'")
    elif exe[0] == '"':
        exe = exe[1:-1]
    return str(script.parent.resolve() / exe) if match["relative"] else exe


def check_environment_paths(
    env: TargetEnv, probe: Probe, scripts: tuple[str, ...]
) -> list[FieldDiff]:
    """The environment is itself, not a copy that still points at its original: `sys.prefix`
    is the environment's directory, a venv's `pyvenv.cfg` names an existing base, and every
    console script of the engine starts this environment's interpreter (a `cp -a` copy's
    scripts start the original's, which may hold another build)."""
    diffs = []
    if probe.prefix.resolve() != env.prefix.resolve():
        diffs.append(
            FieldDiff(field="sys.prefix", recorded=str(env.prefix), found=str(probe.prefix))
        )
    if probe.is_venv:
        try:
            lines = (probe.prefix / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            lines = []
        pairs = (line.partition("=") for line in lines)
        home = next((v.strip() for k, _, v in pairs if k.strip() == "home"), None)
        if not home or not Path(home).is_dir():
            diffs.append(
                FieldDiff(field="pyvenv.cfg home", recorded="an existing directory", found=home)
            )
    for name in scripts:
        found = _script_interpreter(probe.scripts / name)
        if probe.is_venv:  # a venv's interpreter is known by its directory, not by its target
            ours = found is not None and Path(found).parent.resolve() == probe.scripts.resolve()
        else:
            ours = found is not None and Path(found).resolve() == Path(probe.executable).resolve()
        if not ours:
            diffs.append(
                FieldDiff(field=f"script {name}", recorded=str(env.interpreter), found=found)
            )
    return diffs


def _unfinished_install(store: RecordStore, env: TargetEnv) -> VerifyReport | None:
    """A journal means an install is running (its holder has the environment lock) or was
    killed (the lock is free: a flock dies with its process). Our own hold (a launch verifying
    under the lock) is not someone else's install."""
    journal = store.journal()
    if journal is None:
        return None
    holder = exclusive_holder(store.lock_path)
    base = {"environment": str(env.prefix), "distribution": journal.distribution}
    # The journal's distribution, not the profile's: the one that was being installed.
    built = f"commit {journal.commit}" if journal.commit else "a reviewed wheel"
    what = f"{journal.distribution} ({built}"
    if holder is not None and holder != f"pid {os.getpid()}":
        return VerifyReport(
            status="in-progress",
            **base,
            notes=[
                f"an install of {what}, transaction {journal.txid}, {holder}) into this "
                "environment is in progress; wait for it to finish, then verify again"
            ],
        )
    if not store.journal_path.exists():  # it finished between the two looks
        return None
    return VerifyReport(
        status="interrupted",
        **base,
        notes=[
            f"an install of {what}, transaction {journal.txid}) into this environment did not "
            f"finish; run `automl-setup repair --python {env.prefix}` to roll it back, or run the "
            "install again"
        ],
    )


def verify_environment(
    env: TargetEnv,
    distribution: str,
    pending: InstallRecord | None = None,
    probe: Probe | None = None,
    deep: bool = False,
) -> VerifyReport:
    """Installed engine vs its record: direct_url.json, RECORD hashes, wheel files, digest,
    the dependency closure; with `deep`, every file of every closure member against its RECORD.

    `pending` is the record an install is about to write; it is checked before it is stored.
    `probe` is a fresh probe of the environment the caller already holds."""
    store = RecordStore(env.state_dir)
    base = {"environment": str(env.prefix), "distribution": distribution}
    unfinished = _unfinished_install(store, env) if pending is None else None
    if unfinished is not None:
        return unfinished
    record = pending or store.read_record()
    dist_name = record.build.distribution if record else distribution
    if probe is None or dist_name not in probe.dists:
        probe = env.probe([dist_name])
    installed = probe.dists.get(dist_name)
    if installed is None:
        return VerifyReport(
            status="no-engine",
            **{**base, "distribution": dist_name},
            commit=record.source.commit if record and record.source else None,
            requested_ref=record.source.requested_ref if record and record.source else None,
            version=record.build.version if record else None,
            notes=[f"{dist_name} is not installed in {env.prefix}"]
            + ([f"a record exists for {_artifact(record)}"] if record else [])
            + (removed_by_sync(env.prefix, dist_name) if record else []),
        )
    if record is None:
        return VerifyReport(
            status="no-record",
            **base,
            version=installed.version,
            notes=[
                f"{installed.name} {installed.version} is installed without an automl-setup "
                f"record (installer: {installed.installer or 'unknown'}); its source is unproven"
            ],
        )
    diffs = check_direct_url(installed.direct_url, record.source, record.build)
    if installed.version != record.build.version:
        diffs.append(
            FieldDiff(field="build.version", recorded=record.build.version, found=installed.version)
        )
    checked, file_diffs, hashes = (
        check_installed_files(installed.dist_info) if installed.dist_info else (0, [], {})
    )
    diffs += file_diffs
    diffs += check_wheel_files(store, record.build, hashes)
    diffs += check_environment_paths(env, probe, installed.console_scripts)
    digest = compute_identity_digest(
        record.source, record.build, record.environment, record.closure
    )
    if digest != record.identity_digest:
        diffs.append(
            FieldDiff(field="identity_digest", recorded=record.identity_digest, found=digest)
        )
    env_now = environment_info(probe, list(record.environment.dependencies))
    drift = diff_fields(record.environment.model_dump(), env_now.model_dump())
    notes = [
        f"environment changed since install: {d.field} {d.recorded} -> {d.found}" for d in drift
    ]
    restore: list[str] = []
    if record.closure is None:
        notes.append(CLOSURE_NOT_RECORDED)
    else:  # a changed member of the engine's closure is another engine environment
        found = probe.closure(record.build.distribution, list(record.install.extras))
        diffs += closure_differences(record.closure, found)
        if deep:
            count, edited = _deep_check(probe, found, diffs)
            checked += count
            restore = restore_commands(edited, env.interpreter, env.prefix)
    if deep and installed.dist_info:  # bytecode Python would run instead of a checked source
        rows = parse_record_csv((installed.dist_info / "RECORD").read_text(encoding="utf-8"))
        stray = stray_bytecode(env.interpreter, installed.dist_info.parent, [r[0] for r in rows])
        diffs += bytecode_diffs(stray)
        restore = remove_command(stray) + restore
    return VerifyReport(
        status="mismatch" if diffs else "verified",
        **{**base, "distribution": dist_name},
        commit=record.source.commit if record.source else None,
        requested_ref=record.source.requested_ref if record.source else None,
        version=record.build.version,
        identity_digest=record.identity_digest,
        files_checked=checked,
        differences=diffs,
        notes=notes,
        watched=env_now.watched,
        restore_commands=restore,
    )


def _deep_check(probe: Probe, closure: Closure, diffs: list[FieldDiff]) -> tuple[int, Closure]:
    """Every file each closure member's RECORD lists with a hash, hashed on disk (a file
    edited in place, in the environment or through a link into uv's cache): the files checked,
    and the members with a file that differs."""
    checked, edited = 0, {}
    for name, member in closure.items():
        dist_info = dist_info_dir([probe.purelib, probe.platlib], name)
        if dist_info is None:
            continue
        count, found, _hashes = check_installed_files(dist_info)
        checked += count
        diffs += [d.model_copy(update={"field": f"closure.{name}.{d.field}"}) for d in found]
        if found:
            edited[name] = member
    return checked, edited


def _artifact(record: InstallRecord) -> str:
    if record.source is None:
        return f"the reviewed wheel sha256 {record.build.wheel_sha256}"
    return f"commit {record.source.commit}"
