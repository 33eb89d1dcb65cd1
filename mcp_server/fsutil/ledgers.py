"""Append-only JSON-lines ledgers: fsynced single-write appends, dense numbering under a lock,
torn last lines refused, strict reading."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_server.errors import SetupError
from mcp_server.fsutil.files import fsync_path
from mcp_server.fsutil.statedir import io_failure, open_at, open_state, read_file, state_dir

TAIL_CHUNK = 1 << 16


def append_json_line(path: Path, entry: dict[str, Any]) -> None:
    """Append one JSON object as a line and fsync; the line is written with a single write()."""
    line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
    step = "append to"
    with state_dir(path.parent, step=step, create=True) as dir_fd:
        try:
            fd = open_at(dir_fd, path, os.O_RDWR | os.O_CREAT | os.O_APPEND, step=step)
            try:
                _refuse_torn_tail(fd, path)
                is_new = os.fstat(fd).st_size == 0
                _append_whole(fd, line)
            finally:
                os.close(fd)
            if is_new:  # its name durable too
                os.fsync(dir_fd)
        except OSError as exc:
            raise io_failure(step, path, exc) from None


def _append_whole(fd: int, line: bytes) -> None:
    """Append `line` whole and fsync it, or leave the file as it was: a full disk or quota can
    take part of a line (a short write), and that part is cut off again before the OSError."""
    start = os.fstat(fd).st_size
    try:
        if os.write(fd, line) != len(line):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):  # on a read-only file system nothing was written
            os.ftruncate(fd, start)
        raise


def _refuse_torn_tail(fd: int, path: Path) -> None:
    """Appending after a torn last line would glue two entries into one corrupt line."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = os.pread(fd, min(size, TAIL_CHUNK), max(0, size - TAIL_CHUNK))
        offset = size - len(data) + data.rfind(b"\n") + 1
        raise SetupError(
            "append",
            f"{path} ends with a torn line (an interrupted write) at byte {offset}",
            f"inspect it, then cut the torn line off: truncate -s {offset} {path}",
        )


@dataclass(frozen=True)
class JsonLines:
    entries: list[dict[str, Any]]
    torn_line: int | None  # 1-based number of an unterminated or unparsable last line


def read_json_lines(path: Path, *, what: str) -> JsonLines:
    """Every entry; a damaged line in the middle is an error, a torn last line is reported."""
    raw = read_file(path)
    if raw is None:
        return JsonLines([], None)
    lines = raw.split(b"\n")
    trailing = lines.pop()  # b"" when the file ends with a newline
    entries: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        try:
            entries.append(json.loads(line))
        except ValueError:
            raise SetupError(
                f"read {what}",
                f"{path} line {number} is not valid JSON (the file is corrupt)",
                "restore the file from a backup; it is never rewritten automatically",
            ) from None
    torn = len(lines) + 1 if trailing else None
    return JsonLines(entries, torn)


def _last_line(fd: int, size: int) -> bytes:
    """The last complete line of a file that ends with a newline, read from the end."""
    chunk = TAIL_CHUNK
    while True:
        start = max(0, size - chunk)
        data = os.pread(fd, size - start, start)
        body = data[:-1]  # drop the final newline
        cut = body.rfind(b"\n")
        if cut >= 0 or start == 0:
            return body[cut + 1 :]
        chunk *= 2


@contextlib.contextmanager
def numbered_append(
    path: Path, *, key: str, what: str
) -> Iterator[tuple[int, Callable[[dict[str, Any]], None]]]:
    """Hold an exclusive flock on an append-only JSON-lines ledger and yield (the next number,
    a writer): one more than `key` of the last line, read from the tail only, so numbers stay
    unique and dense under concurrency and cost nothing on a long ledger. A torn last line
    refuses: appending after it would glue two entries into one corrupt line."""
    fd = open_state(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, step="append to", create_dirs=True)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _refuse_torn_tail(fd, path)
            size = os.fstat(fd).st_size
            is_new = size == 0
            number = 1
            if size:
                last = _last_line(fd, size)
        except OSError as exc:
            raise io_failure("append to", path, exc) from None
        if size:
            try:
                number = int(json.loads(last)[key]) + 1
            except (ValueError, KeyError, TypeError):
                raise SetupError(
                    f"append to {what}",
                    f"the last line of {path} is not a valid entry",
                    "restore the file from a backup; it is never rewritten automatically",
                ) from None

        def write(entry: dict[str, Any]) -> None:
            line = json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n"
            try:
                _append_whole(fd, line.encode("utf-8"))
            except OSError as exc:
                raise io_failure("append to", path, exc) from None

        yield number, write
    finally:
        os.close(fd)
    if is_new:
        try:
            fsync_path(path.parent)
        except OSError as exc:
            raise io_failure("append to", path, exc) from None
