"""The attempts ledger of an experiment: every launch, resume, refusal and engine exit, numbered,
appended and fsynced, and read back strictly."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Final, Literal

from pydantic import Field, RootModel

from mcp_server.environment.records import FieldDiff, utc_now
from mcp_server.errors import SetupError
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.fsutil import numbered_append
from mcp_server.persisted import Persisted, load_persisted_lines

# The ledger line's format: 2 added stop/submit/cancel, the process start and the SLURM fields.
# Lines of format 1 stay readable (`AttemptEntryV1`): a months-old experiment still resumes.
ATTEMPT_SCHEMA_VERSION: Final = 2


class AttemptEntry(Persisted):
    schema_version: Literal[2] = Field(
        ATTEMPT_SCHEMA_VERSION, description="Format version of the ledger line."
    )
    time: str = Field(description="When it happened (ISO 8601 UTC).")
    action: Literal["launch", "resume", "exit", "stop", "submit", "cancel"] = Field(
        description="submit and cancel: a SLURM controller job (docs/slurm.md); launch, resume "
        "and exit also record each SLURM allocation (generation) of one."
    )
    outcome: Literal["accepted", "refused", "exited", "stopped", "signalled"] = Field(
        description="stop: stopped (the engine ended), signalled (still running after the "
        "grace period), or refused (nothing was signalled)."
    )
    attempt: int = Field(description="1-based number of this attempt in the ledger.")
    host: str = Field(description="Host it happened on.")
    pid: int | None = Field(None, description="The engine's process id; null when no engine ran.")
    process_start: str | None = Field(
        None,
        description="Boot id and start time of the engine process: proves a pid is still ours.",
    )
    exit_code: int | None = Field(None, description="The engine's exit code, when it exited.")
    environment: str | None = Field(
        None, description="The environment the engine ran from (sys.prefix)."
    )
    identity_digest: str | None = Field(None, description="Identity digest of the engine that ran.")
    reason: str = Field("", description="Why (a refusal's or a stop's cause), empty otherwise.")
    differences: list[FieldDiff] = Field(
        description="The identity fields that differed, for a refused resume.", default_factory=list
    )
    log: str | None = Field(None, description="The attempt's log file.")
    job_id: str | None = Field(None, description="SLURM job id, for a SLURM-run experiment.")
    generation: int | None = Field(
        None, description="SLURM allocation: its restart count (0 for the first allocation)."
    )
    node: str | None = Field(None, description="SLURM node the allocation ran on.")
    template_sha256: str | None = Field(
        None, description="sha256 of the rendered controller batch script (submit)."
    )


class AttemptEntryV1(Persisted):
    """A ledger line of format 1 (before stop and SLURM): read and upgraded, never written."""

    schema_version: Literal[1]
    time: str
    action: Literal["launch", "resume", "exit"]
    outcome: Literal["accepted", "refused", "exited"]
    attempt: int
    host: str
    pid: int | None
    exit_code: int | None
    environment: str | None
    identity_digest: str | None
    reason: str
    differences: list[FieldDiff]
    log: str | None

    def upgraded(self) -> AttemptEntry:
        """The same entry in the current format: the fields format 1 did not have are null."""
        return AttemptEntry(**{**self.model_dump(), "schema_version": ATTEMPT_SCHEMA_VERSION})


class _AttemptLine(
    RootModel[Annotated[AttemptEntryV1 | AttemptEntry, Field(discriminator="schema_version")]]
):
    """One line as written by any format, told apart by its `schema_version`."""


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


def record_refusal(files: ExperimentFiles, refusal: SetupError, **fields: Any) -> None:
    """Append `refusal` to the ledger as a `refused` line. When the ledger cannot take it (a
    read-only folder, a full disk), the refusal still names its own step and cause, and says
    that it is not recorded: the ledger's failure is never shown in its place."""
    fields.setdefault("differences", getattr(refusal, "differences", []))
    try:
        log_attempt(files, outcome="refused", reason=refusal.message, **fields)
    except SetupError as failure:
        refusal.details.append(f"not recorded in the attempts ledger: {failure.cause}")


def read_attempts(files: ExperimentFiles) -> tuple[list[AttemptEntry], int | None]:
    """Every entry of the ledger, strictly read, and the number of a torn (interrupted) last
    line, which is reported rather than refused."""
    lines, torn = load_persisted_lines(
        _AttemptLine,
        files.attempts,
        what="attempts ledger",
        entry="attempts ledger line",
        remedy="restore the file from a backup; it is never rewritten automatically",
    )
    entries = [
        line.root.upgraded() if isinstance(line.root, AttemptEntryV1) else line.root
        for line in lines
    ]
    return entries, torn
