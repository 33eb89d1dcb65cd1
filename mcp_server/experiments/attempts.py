"""The attempts ledger of an experiment: every launch, resume, refusal and engine exit, numbered,
appended and fsynced, and read back strictly."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Any, Literal

from pydantic import Field

from mcp_server.environment.records import FieldDiff, utc_now
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.fsutil import numbered_append
from mcp_server.persisted import Persisted, load_persisted_lines


class AttemptEntry(Persisted):
    schema_version: Literal[1] = 1
    time: str
    action: Literal["launch", "resume", "exit"]
    outcome: Literal["accepted", "refused", "exited"]
    attempt: int = Field(description="1-based number of this attempt in the ledger.")
    host: str
    pid: int | None = None
    exit_code: int | None = None
    environment: str | None = None
    identity_digest: str | None = None
    reason: str = ""
    differences: list[FieldDiff] = Field(default_factory=list)
    log: str | None = None


@contextlib.contextmanager
def next_attempt(files: ExperimentFiles) -> Iterator[tuple[int, Callable[..., AttemptEntry]]]:
    """The next attempt number, held (ledger flock) until its entry is written."""
    with numbered_append(files.attempts, key="attempt", what="attempts ledger") as (n, write):

        def log(**fields: Any) -> AttemptEntry:
            entry = AttemptEntry(time=utc_now(), host=socket.gethostname(), attempt=n, **fields)
            write(entry.model_dump(mode="json"))
            return entry

        yield n, log


def log_attempt(files: ExperimentFiles, **fields: Any) -> AttemptEntry:
    with next_attempt(files) as (_number, log):
        return log(**fields)


def read_attempts(files: ExperimentFiles) -> tuple[list[AttemptEntry], int | None]:
    """Every entry of the ledger, strictly read, and the number of a torn (interrupted) last
    line, which is reported rather than refused."""
    return load_persisted_lines(
        AttemptEntry,
        files.attempts,
        what="attempts ledger",
        entry="attempts ledger line",
        remedy="restore the file from a backup; it is never rewritten automatically",
    )
