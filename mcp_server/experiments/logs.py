"""The bounded tail of an experiment's logs: an attempt's engine output (automl-setup's own
`attempt-N.log`) or one trial's output (through the engine's read-only `logs --trial`), and
following an attempt's log while its engine runs. The MCP log resource reads through here too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.errors import InvalidInput, SetupError
from mcp_server.experiments.attempts import read_attempts
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.engine import engine_json
from mcp_server.experiments.files import (
    ExperimentFiles,
    lock_is_held,
    require_experiment,
    status_fix,
)
from mcp_server.fsutil import io_failure, open_reader
from mcp_server.redact import redact_text
from mcp_server.requests import LogsQuery

LOG_TAIL_BYTES = 64 * 1024
FOLLOW_POLL_S = 0.5


class LogTail(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment whose log this is.")
    source: Literal["attempt", "trial"] = Field(description="An attempt's or a trial's log.")
    attempt: int | None = Field(description="Attempt number (attempt logs).")
    trial: int | None = Field(description="Trial index (trial logs).")
    path: str = Field(description="The log file (a trial's: its directory).")
    size_bytes: int = Field(description="Size of the whole log, in bytes.")
    truncated: bool = Field(description="True when only the tail is shown.")
    text: str = Field(description="The last 64 KiB at most, from a whole line; secrets masked.")


def tail_text(data: bytes, size: int, limit: int = LOG_TAIL_BYTES) -> str:
    """The text of the last `limit` bytes of a log of `size` bytes, from its first whole line
    (so that no credential is cut where redaction would no longer recognise it), masked."""
    tail = data[-limit:]
    if size > limit and b"\n" in tail:
        tail = tail.partition(b"\n")[2]
    return redact_text(tail.decode("utf-8", errors="replace"))


def attempt_log(files: ExperimentFiles, attempt: int) -> tuple[Path, int, str]:
    """Path, size and bounded tail of attempt `attempt`'s log."""
    path = files.log(attempt)
    try:
        with open_reader(path) as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - LOG_TAIL_BYTES))
            data = log.read(LOG_TAIL_BYTES)
    except FileNotFoundError:
        raise InvalidInput(
            "read log",
            f"experiment {files.experiment_id} has no log of attempt {attempt}",
            "see its attempts resource for the attempts that have a log",
        ) from None
    except OSError as exc:
        raise SetupError(
            "read log", f"cannot read {path}: {exc.strerror}", "check its permissions"
        ) from None
    return path, size, tail_text(data, size)


def last_attempt_with_log(files: ExperimentFiles) -> int:
    entries, _torn = read_attempts(files)
    numbers = [e.attempt for e in entries if e.log]
    if not numbers:
        raise SetupError(
            "logs",
            f"experiment {files.experiment_id} has no attempt with a log yet",
            ["see its attempts with ", status_fix(files)],
        )
    return numbers[-1]


def experiment_log(query: LogsQuery) -> LogTail:
    files = ExperimentFiles(query.workspace.path, query.experiment_id)
    require_experiment(files, "logs", remedy="logs takes an exact id; list them with")
    if query.trial is not None:
        return _trial_log(files, query.trial)
    attempt = query.attempt if query.attempt is not None else last_attempt_with_log(files)
    path, size, text = attempt_log(files, attempt)
    return LogTail(
        experiment_id=files.experiment_id,
        source="attempt",
        attempt=attempt,
        trial=None,
        path=str(path),
        size_bytes=size,
        truncated=size > LOG_TAIL_BYTES,
        text=text,
    )


def _trial_log(files: ExperimentFiles, trial: int) -> LogTail:
    binding = read_binding(files)
    entries, _torn = read_attempts(files)
    ran = [e.environment for e in entries if e.outcome == "accepted" and e.environment]
    args = ["--workspace", str(files.workspace), "--trial", str(trial)]
    data, problem = engine_json(binding, ran[-1] if ran else None, "logs", args)
    if data is None:
        raise SetupError(
            "logs",
            f"trial {trial} of {files.experiment_id}: {problem}",
            ["trials count from 0; see the trials table of ", status_fix(files)],
        )
    whole = f"== stdout ==\n{data.get('stdout', '')}\n== stderr ==\n{data.get('stderr', '')}"
    raw = whole.encode()
    return LogTail(
        experiment_id=files.experiment_id,
        source="trial",
        attempt=None,
        trial=trial,
        path=str(data.get("trial_dir", "")),
        size_bytes=len(raw),
        truncated=len(raw) > LOG_TAIL_BYTES,
        text=tail_text(raw, len(raw)),
    )


def follow_log(
    files: ExperimentFiles, tail: LogTail, emit: Callable[[str], None], poll: float = FOLLOW_POLL_S
) -> None:
    """After `tail`, pass on what the attempt's log gains until no engine holds the
    controller lock any more and the log has been read to its end."""
    assert tail.attempt is not None
    path, offset = Path(tail.path), tail.size_bytes
    try:
        log = open_reader(path)
    except FileNotFoundError as exc:  # removed since its tail was read
        raise io_failure("follow log", path, exc) from None
    with log:
        while True:
            running = lock_is_held(files)  # before reading: the last bytes come before exit
            try:
                log.seek(offset)
                data = log.read()
            except OSError as exc:  # not around emit: a closed pipe is the face's to handle
                raise io_failure("follow log", path, exc) from None
            # Whole lines only, so a credential is never split where redaction misses it.
            data = data[: data.rfind(b"\n") + 1] if running else data
            if data:
                offset += len(data)
                emit(redact_text(data.decode("utf-8", errors="replace")))
            if not running:
                return
            time.sleep(poll)
