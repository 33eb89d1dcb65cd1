"""What was installed: identity models, the record store kept with the environment, verification.

The pydantic models here are the single source of the record formats; the JSON Schemas in
`mcp_server/schemas/` are generated from them (`python -m mcp_server.schemagen`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import Field

from mcp_server.build import record_hash
from mcp_server.errors import ExitCode, SetupError
from mcp_server.fsutil import (
    append_json_line,
    atomic_write_bytes,
    exclusive_holder,
    read_file,
    read_json_lines,
)
from mcp_server.persisted import Persisted, load_persisted
from mcp_server.targetenv import WATCHED_PACKAGES, Probe, TargetEnv

SCHEMA_VERSION = 1


class _Record(Persisted):
    """Frozen, no extra fields, every field required when read from a file."""


class SourceIdentity(_Record):
    repository: str = Field(description="Repository URL with any credentials stripped.")
    subdirectory: str = Field(description="Path of the engine package inside the repository.")
    requested_ref: str | None = Field(
        description="refs/heads/<branch> that was resolved, or null for an install by commit."
    )
    commit: str = Field(description="Full commit id that was fetched and built.")
    subtree_id: str = Field(description="Git tree id of the subdirectory at that commit.")
    commit_time: int = Field(description="Committer time, seconds since the epoch.")


class BuildIdentity(_Record):
    distribution: str
    version: str
    wheel_filename: str
    wheel_sha256: str = Field(description="sha256 of the wheel (built with SOURCE_DATE_EPOCH).")
    record_digest: str = Field(description="sha256 of the wheel's RECORD file.")
    backend: str = Field(description="PEP 517 build backend named by the source.")


class InstallInfo(_Record):
    interpreter: str
    environment: str = Field(description="sys.prefix of the target interpreter.")
    installer: str
    installer_version: str
    tool_version: str = Field(description="automl-setup version that made the record.")
    extras: list[str] = Field(default_factory=list)
    transaction: str = Field(description="Id of the install transaction that wrote the record.")
    time: str = Field(description="UTC time of the install, ISO 8601.")


class EnvironmentInfo(_Record):
    python_version: str
    implementation: str
    platform: str
    dependencies: dict[str, str | None] = Field(
        description="Installed versions of the engine's direct dependencies (null: missing)."
    )
    watched: dict[str, str | None] = Field(
        description="Installed versions of watched packages (gepa, torch); null when absent."
    )
    torch_cuda: str | None = Field(description="CUDA version torch was built for, if any.")


class InstallRecord(_Record):
    schema_version: Literal[1] = SCHEMA_VERSION
    source: SourceIdentity
    build: BuildIdentity
    install: InstallInfo
    environment: EnvironmentInfo
    identity_digest: str


class HistoryEntry(_Record):
    schema_version: Literal[1] = SCHEMA_VERSION
    time: str
    event: Literal["installed", "rolled-back"]
    transaction: str
    commit: str
    requested_ref: str | None
    distribution: str
    version: str | None = None
    identity_digest: str | None = None
    wheel_sha256: str | None = None
    detail: str = ""


class FieldDiff(_Record):
    field: str
    recorded: str | None
    found: str | None


class Journal(_Record):
    """`journal.json`, written before an install changes the environment: everything a
    rollback needs to undo it. Read strictly: a rollback never guesses at a missing field."""

    schema_version: Literal[1] = SCHEMA_VERSION
    txid: str = Field(pattern=r"^[0-9a-f]{12}$", description="Names transactions/<txid>/.")
    pid: int
    started: str
    commit: str
    requested_ref: str | None
    distribution: str
    previous_distribution: str | None
    backup: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(
        description="(original path, file name under transactions/<txid>/backup/) per file."
    )
    versions_before: dict[str, str]
    new_wheel_record: str | None = Field(
        description="Digest of a wheel RECORD this install stored first (a rollback removes it)."
    )
    new_files: list[str]


VerifyStatus = Literal[
    "verified", "mismatch", "no-engine", "no-record", "in-progress", "interrupted"
]


class VerifyReport(_Record):
    status: VerifyStatus
    environment: str
    distribution: str
    commit: str | None = None
    requested_ref: str | None = None
    version: str | None = None
    identity_digest: str | None = None
    files_checked: int = 0
    differences: list[FieldDiff] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        if self.status == "verified":
            return ExitCode.OK
        if self.status in ("no-engine", "no-record"):
            return ExitCode.NOTHING_INSTALLED
        return ExitCode.REFUSED


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def identity_fields(
    source: SourceIdentity, build: BuildIdentity, environment: EnvironmentInfo
) -> dict[str, Any]:
    """The resume-relevant fields. The requested ref, paths and times are not identity: the
    same commit installed through another branch name is the same engine build."""
    return {
        "source": source.model_dump(exclude={"requested_ref"}),
        "build": build.model_dump(),
        "environment": environment.model_dump(),
    }


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def compute_identity_digest(
    source: SourceIdentity, build: BuildIdentity, environment: EnvironmentInfo
) -> str:
    return hashlib.sha256(canonical_json(identity_fields(source, build, environment))).hexdigest()


def flatten(value: Any, prefix: str = "") -> dict[str, str | None]:
    """Nested dict -> {'a.b': 'str'} for field-level comparisons."""
    if isinstance(value, dict):
        out: dict[str, str | None] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: None if value is None else str(value)}


def diff_fields(recorded: dict[str, Any], found: dict[str, Any]) -> list[FieldDiff]:
    left, right = flatten(recorded), flatten(found)
    return [
        FieldDiff(field=key, recorded=left.get(key), found=right.get(key))
        for key in sorted(set(left) | set(right))
        if left.get(key) != right.get(key)
    ]


def environment_info(probe: Probe, direct_dependencies: list[str]) -> EnvironmentInfo:
    return EnvironmentInfo(
        python_version=probe.python_version,
        implementation=probe.implementation,
        platform=probe.platform,
        dependencies={name: probe.versions.get(name) for name in sorted(direct_dependencies)},
        watched={name: probe.versions.get(name) for name in WATCHED_PACKAGES},
        torch_cuda=probe.torch_cuda if "torch" in probe.versions else None,
    )


def direct_dependency_names(
    requires: tuple[str, ...] | list[str], extras: list[str] | None = None
) -> list[str]:
    """Canonical names of the engine's requirements, except those of extras not installed.
    Requirements behind other markers are kept: their version is recorded (null if absent)."""
    names = set()
    for spec in requires:
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            continue
        if (
            req.marker is None
            or "extra" not in str(req.marker)
            or any(req.marker.evaluate({"extra": extra}) for extra in extras or [])
        ):
            names.add(canonicalize_name(req.name))
    return sorted(names)


# --------------------------------------------------------------------------------------------
# The store kept with the environment


class RecordStore:
    """`<sys.prefix>/.automl-setup/`: record, history, wheel RECORDs, journal, lock."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        self.record_path = state_dir / "engine-record.json"
        self.history_path = state_dir / "history.jsonl"
        self.journal_path = state_dir / "journal.json"
        self.lock_path = state_dir / "lock"
        self.wheel_records = state_dir / "wheel-records"
        self.transactions = state_dir / "transactions"

    def read_record(self) -> InstallRecord | None:
        data = read_file(self.record_path)
        if data is None:
            return None
        return load_persisted(
            InstallRecord,
            data,
            what="install record",
            path=self.record_path,
            remedy="the record was edited or damaged; reinstall into a fresh environment",
        )

    def write_record(self, record: InstallRecord) -> None:
        atomic_write_bytes(self.record_path, record.model_dump_json(indent=2).encode() + b"\n")

    def wheel_record_path(self, digest: str) -> Path:
        return self.wheel_records / f"{digest}.RECORD"

    def store_wheel_record(self, text: str) -> None:
        data = text.encode("utf-8")
        path = self.wheel_record_path(hashlib.sha256(data).hexdigest())
        if not path.exists():  # content-addressed: never rewritten with other bytes
            atomic_write_bytes(path, data)

    def append_history(self, entry: HistoryEntry) -> None:
        append_json_line(self.history_path, entry.model_dump())

    def read_history(self) -> tuple[list[HistoryEntry], int | None]:
        lines = read_json_lines(self.history_path, what="install history")
        entries = [
            load_persisted(
                HistoryEntry,
                entry,
                what="install history entry",
                path=self.history_path,
                remedy="the history was edited or damaged; restore it from a backup (it is "
                "never rewritten automatically)",
                line=number,
            )
            for number, entry in enumerate(lines.entries, start=1)
        ]
        return entries, lines.torn_line

    def journal(self) -> Journal | None:
        """The journal of an unfinished install, or None. A damaged one refuses: undoing an
        install from guessed fields could remove the whole environment."""
        data = read_file(self.journal_path)
        if data is None:
            return None
        try:
            return load_persisted(
                Journal,
                data,
                what="install journal",
                path=self.journal_path,
                remedy=f"inspect {self.journal_path} and the previous engine's files backed up "
                f"under {self.transactions}/ (both are kept as they are); to start afresh, "
                "install into a new environment (--python NEW --create-env)",
            )
        except SetupError as exc:
            raise SetupError(
                exc.step, f"{exc.cause}: the journal is damaged; nothing was changed", exc.remedy
            ) from None


# --------------------------------------------------------------------------------------------
# Verification


def parse_record_csv(text: str) -> list[tuple[str, str, str]]:
    return [(row[0], row[1], row[2]) for row in csv.reader(io.StringIO(text)) if len(row) >= 3]


def check_direct_url(raw: str | None, source: SourceIdentity) -> list[FieldDiff]:
    if raw is None:
        return [FieldDiff(field="direct_url.json", recorded="present", found="missing")]
    try:
        data = json.loads(raw)
    except ValueError:
        return [FieldDiff(field="direct_url.json", recorded="valid JSON", found="unparsable")]
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
        data = path.read_bytes()
    except OSError:
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
    if holder is not None and holder != f"pid {os.getpid()}":
        return VerifyReport(
            status="in-progress",
            **base,
            notes=[
                f"an install of commit {journal.commit} (transaction {journal.txid}, {holder}) "
                "into this environment is in progress; wait for it to finish, then verify again"
            ],
        )
    if not store.journal_path.exists():  # it finished between the two looks
        return None
    return VerifyReport(
        status="interrupted",
        **base,
        notes=[
            f"an install (transaction {journal.txid}) into this environment did not finish; "
            f"run `automl-setup repair --python {env.prefix}` to roll it back, or run the "
            "install again"
        ],
    )


def verify_environment(
    env: TargetEnv,
    distribution: str,
    pending: InstallRecord | None = None,
    probe: Probe | None = None,
) -> VerifyReport:
    """Installed engine vs its record: direct_url.json, RECORD hashes, wheel files, digest.

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
            commit=record.source.commit if record else None,
            requested_ref=record.source.requested_ref if record else None,
            version=record.build.version if record else None,
            notes=[f"{dist_name} is not installed in {env.prefix}"]
            + ([f"a record exists for commit {record.source.commit}"] if record else []),
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
    diffs = check_direct_url(installed.direct_url, record.source)
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
    digest = compute_identity_digest(record.source, record.build, record.environment)
    if digest != record.identity_digest:
        diffs.append(
            FieldDiff(field="identity_digest", recorded=record.identity_digest, found=digest)
        )
    env_now = environment_info(probe, list(record.environment.dependencies))
    drift = diff_fields(record.environment.model_dump(), env_now.model_dump())
    notes = [
        f"environment changed since install: {d.field} {d.recorded} -> {d.found}" for d in drift
    ]
    return VerifyReport(
        status="mismatch" if diffs else "verified",
        **{**base, "distribution": dist_name},
        commit=record.source.commit,
        requested_ref=record.source.requested_ref,
        version=record.build.version,
        identity_digest=record.identity_digest,
        files_checked=checked,
        differences=diffs,
        notes=notes,
    )
