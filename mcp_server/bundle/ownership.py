"""What `automl-setup init` owns in a project, and how each owned thing stands now.

An owned thing is a whole file (a skill file in a discovery folder) or one entry of a config
file someone else also writes (`mcpServers.automl-setup` of `.mcp.json`, `[mcp_servers.
automl-setup]` of `.codex/config.toml`, the engine table of the project file). The record
(`.automl-setup/init.json` in the project) keeps the sha256 of each as init wrote it, and of an
entry each key it wrote (bundle/members.py): a thing whose bytes (an entry: whose keys) still
have that digest is init's to replace; anything else is someone's edit. A key someone added to
an entry is theirs, never an edit. The record of 0.1.0 (format 1: one digest per entry) is
read and carried forward; a newer format is refused naming it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from mcp_server.fsutil import atomic_write_bytes, read_file
from mcp_server.persisted import Persisted, format_version, load_persisted

RECORD_PATH = ".automl-setup/init.json"
Agent = Literal["claude", "codex"]
AGENTS: tuple[Agent, ...] = ("claude", "codex")


class OwnedItemV1(Persisted):
    path: str = Field(description="The file, relative to the project (POSIX).")
    key: list[str] = Field(description="The entry inside it; empty for the whole file.")
    sha256: str = Field(
        description="sha256 of what init wrote: the file's bytes, or the entry's canonical JSON "
        "(sorted keys, no spaces)."
    )


class OwnedKey(Persisted):
    key: list[str] = Field(description="A key init wrote inside the entry (a path of names).")
    sha256: str = Field(description="sha256 of its value's canonical JSON.")


class OwnedItem(OwnedItemV1):
    keys: list[OwnedKey] = Field(
        default_factory=list,
        description="An entry: every key init wrote in it (the others are someone else's); "
        "a whole file: empty.",
    )


class _Record(Persisted):
    schema_version: int = Field(description="The format of the record.")
    tool_version: str = Field(description="The automl-setup version that wrote it last.")
    bundle_sha256: str = Field(description="Digest of the skills it wrote (`skills manifest`).")
    skills: list[str] = Field(description="The bundled skills, by name.")
    agents: list[Agent] = Field(description="The clients it set up.")
    updated_at: str = Field(description="When it was last written (UTC, ISO 8601).")


class InitRecordV1(_Record):
    """The record of 0.1.0: one digest per entry (read, and carried forward by init)."""

    schema_version: Literal[1] = 1
    items: list[OwnedItemV1] = Field(description="Every file and entry it owns.")


class InitRecord(_Record):
    """`.automl-setup/init.json`: everything `automl-setup init` wrote into the project."""

    schema_version: Literal[2] = 2
    items: list[OwnedItem] = Field(
        description="Every file and entry it owns, with its digest (an entry's: by key)."
    )


def read_record(project: Path) -> InitRecord | InitRecordV1 | None:
    path = project / RECORD_PATH
    data = read_file(path)
    if data is None:
        return None
    model: type[InitRecord | InitRecordV1] = (
        InitRecordV1 if format_version(data) == 1 else InitRecord
    )
    return load_persisted(
        model,
        data,
        what="init record",
        path=path,
        remedy=f"restore {RECORD_PATH} from version control; without it init owns nothing there",
    )


def write_record(project: Path, record: InitRecord) -> None:
    data = (record.model_dump_json(indent=2) + "\n").encode("utf-8")
    atomic_write_bytes(project / RECORD_PATH, data)


def entry_digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class State(str, Enum):
    CURRENT = "current"  # as init would write it
    NEW = "new"  # not there yet, and nobody else's: init creates it
    STALE = "stale"  # as init wrote it, but the bundle (or the server command) moved on
    RETIRED = "retired"  # as init wrote it, no longer in the bundle: init removes it
    MISSING = "missing"  # init wrote it, it is gone: init writes it again
    EDITED = "edited"  # changed since init wrote it: never overwritten
    FOREIGN = "foreign"  # there already, written by someone else: never overwritten

    @property
    def refused(self) -> bool:
        return self in (State.EDITED, State.FOREIGN)


@dataclass(frozen=True)
class Judged:
    state: State
    adopt: bool = False  # already exactly what init writes, but not yet in the record


def judge(current: str | None, recorded: str | None, wanted: str | None) -> Judged:
    """How a thing stands, from the digests of what is there, what init recorded and what it
    would write now (None: absent, never recorded, or to be removed)."""
    if current is not None and current == wanted:
        return Judged(State.CURRENT, adopt=recorded != current)
    if current is None:
        if wanted is None:
            return Judged(State.CURRENT)  # retired and already gone
        return Judged(State.NEW if recorded is None else State.MISSING)
    if recorded is None:
        return Judged(State.FOREIGN)
    if current != recorded:
        return Judged(State.EDITED)
    return Judged(State.RETIRED if wanted is None else State.STALE)
