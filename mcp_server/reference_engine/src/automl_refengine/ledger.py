"""The append-only ledger of an experiment: one JSON event per line, fsync after each.

The ledger is the source of truth; `state.json` is a snapshot derived from it. Every
event carries `seq` (its 1-based line number) and `time` (UTC); events written by a
controller also carry `session` and `session_elapsed_s` (monotonic seconds since that
controller started), which is how total elapsed time survives restarts and SIGKILL.

Reading never repairs: a last line without its newline is a torn append and is
reported with its line number and byte offset; any undecodable or out-of-order line
is corruption. Both refuse. Only the read-only views of a running experiment skip a
partial last line: there it is an append still in progress.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from automl_refengine.durable import fsync_dir, write_all
from automl_refengine.errors import CorruptState
from automl_refengine.manifest import ParamValue


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(ge=1)
    time: str
    session: int | None = Field(default=None, ge=1)
    session_elapsed_s: float | None = Field(default=None, ge=0)


class SessionStarted(_Event):
    event: Literal["session_started"] = "session_started"
    experiment_id: str
    mode: Literal["run", "resume"]
    pid: int
    engine_version: str
    manifest_sha256: str


class TrialStarted(_Event):
    event: Literal["trial_started"] = "trial_started"
    index: int = Field(ge=0)
    attempt: int = Field(ge=1)
    params: dict[str, ParamValue]
    argv: list[str]
    # The trial's pid, which is also its process group id; None when the launch failed.
    pgid: int | None


class TrialFinished(_Event):
    event: Literal["trial_finished"] = "trial_finished"
    index: int = Field(ge=0)
    attempt: int = Field(ge=1)
    status: Literal["succeeded", "failed"]
    reason: Literal[
        "ok", "exit_code", "bad_metrics", "trial_timeout", "total_timeout", "launch_error"
    ]
    value: float | None
    metrics: dict[str, float]
    returncode: int | None
    duration_s: float
    detail: str


class TrialInterrupted(_Event):
    event: Literal["trial_interrupted"] = "trial_interrupted"
    index: int = Field(ge=0)
    attempt: int = Field(ge=1)
    reason: Literal["signal", "cancel", "reconciled"]
    detail: str


class ExperimentFinished(_Event):
    event: Literal["experiment_finished"] = "experiment_finished"
    state: Literal["completed", "failed"]
    stop_reason: Literal["max_trials", "grid_exhausted", "total_timeout"]


class ExperimentCancelled(_Event):
    event: Literal["experiment_cancelled"] = "experiment_cancelled"
    source: Literal["controller", "cancel_command"]


class SessionEnded(_Event):
    event: Literal["session_ended"] = "session_ended"
    reason: Literal["finished", "signal", "cancelled"]
    signal: str | None


Event = Annotated[
    SessionStarted
    | TrialStarted
    | TrialFinished
    | TrialInterrupted
    | ExperimentFinished
    | ExperimentCancelled
    | SessionEnded,
    Field(discriminator="event"),
]
_EVENT = TypeAdapter(Event)
E = TypeVar("E", bound=_Event)


def read_events(path: Path, *, live_writer: bool = False) -> list[Event]:
    """All events; `live_writer` (a running controller may be mid-append) skips a partial tail."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CorruptState(f"ledger {path} is missing") from None
    lines = data.split(b"\n")
    if lines[-1] and live_writer:
        lines[-1] = b""
    if lines[-1]:
        number = len(lines)
        offset = len(data) - len(lines[-1])
        raise CorruptState(
            f"ledger {path} line {number} is torn (an append of {len(lines[-1])} bytes was "
            f"cut short; the file should end after byte {offset}); refusing. After "
            f"inspecting it, `truncate -s {offset} {path}` drops the torn line and resume "
            "re-runs whatever it described"
        )
    events: list[Event] = []
    for number, line in enumerate(lines[:-1], start=1):
        try:
            event = _EVENT.validate_python(json.loads(line))
        except (ValueError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise CorruptState(
                f"ledger {path} line {number} is not a valid event: {first}"
            ) from None
        if event.seq != number:
            raise CorruptState(f"ledger {path} line {number} carries seq {event.seq}")
        events.append(event)
    return events


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class LedgerWriter:
    """Appends events under the experiment lock; each append is fsynced before it returns."""

    def __init__(self, path: Path, *, next_seq: int) -> None:
        exists = path.exists()
        self.path = path
        self.next_seq = next_seq
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if not exists:
            fsync_dir(path.parent)

    def append(self, kind: type[E], **fields: Any) -> E:
        event = kind(seq=self.next_seq, time=utc_now(), **fields)
        line = json.dumps(event.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        # One write per line: O_APPEND keeps it contiguous, fsync makes it durable. A full
        # disk or quota can take part of a line: that part is cut off again, so the ledger
        # ends after a whole line whenever this raises, and resume finds no torn line.
        start = os.fstat(self._fd).st_size
        try:
            write_all(self._fd, line.encode() + b"\n")
            os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise
        self.next_seq += 1
        return event

    def close(self) -> None:
        os.close(self._fd)
