"""What was installed, as kept with the environment: the record models and their store.

The pydantic models here are the single source of the record formats; the JSON Schemas in
`mcp_server/schemas/` are generated from them (`python -m mcp_server.schemagen`).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from mcp_server.environment.closure import ClosureMember
from mcp_server.errors import SetupError
from mcp_server.fsutil import append_json_line, atomic_write_bytes, read_file
from mcp_server.persisted import (
    NewerFormat,
    Persisted,
    format_version,
    load_persisted,
    load_persisted_lines,
)

SCHEMA_VERSION: Final = 1
# The install record's format: 2 added `origin` (and a null `source` for a reviewed wheel), 3
# the engine's requirement closure. Older records are read as what they were (source builds;
# no closure recorded) and upgraded in memory (`RecordStore.read_record`).
RECORD_SCHEMA_VERSION: Final = 3
# Which kind of artifact was installed: a wheel automl-setup built from a commit, or a wheel
# someone reviewed and handed in by its sha256 (no git fields exist for it, none are invented).
Origin = Literal["source-build", "reviewed-wheel"]


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
    distribution: str = Field(description="Distribution name of the wheel.")
    version: str = Field(description="Version of the wheel.")
    wheel_filename: str = Field(description="File name of the wheel.")
    wheel_sha256: str = Field(description="sha256 of the wheel (built with SOURCE_DATE_EPOCH).")
    record_digest: str = Field(description="sha256 of the wheel's RECORD file.")
    backend: str | None = Field(
        description="PEP 517 build backend named by the source; null for a reviewed wheel."
    )


class InstallInfo(_Record):
    interpreter: str = Field(description="The target interpreter the engine was installed with.")
    environment: str = Field(description="sys.prefix of the target interpreter.")
    installer: str = Field(description="What installed the wheel (uv).")
    installer_version: str = Field(description="Version of the installer.")
    tool_version: str = Field(
        description="The automl-setup build that made the record: its version, with the commit "
        "it was built from as a local label where known (`0.2.0.dev0+g<commit>`)."
    )
    extras: list[str] = Field(
        description="The engine's extras installed with it.", default_factory=list
    )
    transaction: str = Field(description="Id of the install transaction that wrote the record.")
    time: str = Field(description="UTC time of the install, ISO 8601.")


class EnvironmentInfo(_Record):
    python_version: str = Field(description="Python version of the target interpreter.")
    implementation: str = Field(description="Python implementation (CPython, ...).")
    platform: str = Field(description="Platform tag of the target interpreter.")
    dependencies: dict[str, str | None] = Field(
        description="Installed versions of the engine's direct dependencies (null: missing)."
    )
    watched: dict[str, str | None] = Field(
        description="Installed versions of watched packages (gepa, torch); null when absent."
    )
    torch_cuda: str | None = Field(description="CUDA version torch was built for, if any.")


class InstallRecordV1(_Record):
    """The record format 1 (before reviewed wheels): always a source build."""

    schema_version: Literal[1] = SCHEMA_VERSION
    source: SourceIdentity
    build: BuildIdentity
    install: InstallInfo
    environment: EnvironmentInfo
    identity_digest: str


class InstallRecordV2(_Record):
    """The record format 2 (before the closure was recorded)."""

    schema_version: Literal[2] = 2
    origin: Origin = Field(description="Which kind of artifact was installed.")
    source: SourceIdentity | None = Field(
        description="Where the wheel was built from; null exactly for a reviewed wheel."
    )
    build: BuildIdentity = Field(description="The wheel that was installed.")
    install: InstallInfo = Field(description="How and where it was installed.")
    environment: EnvironmentInfo = Field(
        description="The interpreter and platform it was installed for."
    )
    identity_digest: str = Field(
        description="sha256 over the identity fields (source, build, environment, closure)."
    )

    @model_validator(mode="after")
    def _origin_matches_source(self) -> InstallRecordV2:
        if (self.source is None) != (self.origin == "reviewed-wheel"):
            raise ValueError("a source build has a source, a reviewed wheel has none")
        return self


class InstallRecord(InstallRecordV2):
    schema_version: Literal[3] = Field(
        RECORD_SCHEMA_VERSION, description="Format version of the install record."
    )  # type: ignore[assignment]
    closure: dict[str, ClosureMember] | None = Field(
        description="Every distribution of the engine's requirement closure as installed, by "
        "canonical name; null only for a record of an older format (read and upgraded)."
    )


class HistoryEntry(_Record):
    schema_version: Literal[1] = Field(
        SCHEMA_VERSION, description="Format version of the history line."
    )
    time: str = Field(description="When it happened (ISO 8601 UTC).")
    event: Literal["installed", "rolled-back"] = Field(description="installed, or rolled-back.")
    transaction: str = Field(description="Id of the install transaction.")
    commit: str | None = Field(description="Commit built; null for a reviewed wheel.")
    requested_ref: str | None = Field(
        description=(
            "The ref it was installed from (refs/heads/<branch>); null: by commit or a "
            "reviewed wheel."
        ),
    )
    distribution: str = Field(description="Distribution name of the engine.")
    version: str | None = Field(None, description="Version of the engine; null when unknown.")
    identity_digest: str | None = Field(
        None, description="Identity digest of the installed engine; null when unknown."
    )
    wheel_sha256: str | None = Field(
        None, description="sha256 of the installed wheel; null when unknown."
    )
    detail: str = Field("", description="What happened, in words (a rollback's cause).")


class FieldDiff(_Record):
    field: str = Field(
        description="Identity field that differs (dotted: source.commit, closure member name, ...)."
    )
    recorded: str | None = Field(
        description="Its value in the record or binding; null: absent there."
    )
    found: str | None = Field(description="Its value found now; null: absent now.")

    def describe(self, recorded: str = "recorded") -> str:
        """The one way a difference is written, in messages, refusals and ledgers."""
        return f"{self.field}: {recorded} {self.recorded}, found {self.found}"


class Journal(_Record):
    """`journal.json`, written before an install changes the environment: everything a
    rollback needs to undo it. Read strictly: a rollback never guesses at a missing field."""

    schema_version: Literal[1] = SCHEMA_VERSION
    txid: str = Field(pattern=r"^[0-9a-f]{12}$", description="Names transactions/<txid>/.")
    pid: int
    started: str
    commit: str | None = Field(description="Commit built; null for a reviewed wheel.")
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


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
        remedy = "the record was edited or damaged; reinstall into a fresh environment"
        older: dict[object, type[InstallRecordV1 | InstallRecordV2]] = {
            1: InstallRecordV1,
            2: InstallRecordV2,
        }
        version = format_version(data)
        if version in older:
            old = load_persisted(
                older[version], data, what="install record", path=self.record_path, remedy=remedy
            )
            fields = {"origin": "source-build", **old.model_dump(), "closure": None}
            return InstallRecord(**{**fields, "schema_version": RECORD_SCHEMA_VERSION})
        return load_persisted(
            InstallRecord, data, what="install record", path=self.record_path, remedy=remedy
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
        return load_persisted_lines(
            HistoryEntry,
            self.history_path,
            what="install history",
            entry="install history entry",
            remedy="the history was edited or damaged; restore it from a backup (it is never "
            "rewritten automatically)",
        )

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
        except NewerFormat:
            raise  # a newer automl-setup's install: not damaged, and not ours to undo
        except SetupError as exc:
            raise SetupError(
                exc.step, f"{exc.cause}: the journal is damaged; nothing was changed", exc.remedy
            ) from None


def log_installed(store: RecordStore, record: InstallRecord) -> None:
    """The history line of a completed install (written once its record is in place)."""
    store.append_history(
        HistoryEntry(
            time=record.install.time,
            event="installed",
            transaction=record.install.transaction,
            commit=record.source.commit if record.source else None,
            requested_ref=record.source.requested_ref if record.source else None,
            distribution=record.build.distribution,
            version=record.build.version,
            identity_digest=record.identity_digest,
            wheel_sha256=record.build.wheel_sha256,
        )
    )
