"""Durable file primitives: atomic replace, exclusive create, fsynced append-only JSON lines."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_server.errors import SetupError

TAIL_CHUNK = 1 << 16
IO_REMEDY = (
    "check the path: permissions, free disk space, a read-only file system, an immutable "
    "attribute (lsattr), or a file or directory where the other is expected; then run the "
    "command again"
)


def io_failure(step: str, path: Path, exc: OSError) -> SetupError:
    """An OSError as a refusal naming the path and the system's own words for the cause."""
    other = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return SetupError(step, f"cannot {step} {path}{other}: {exc.strerror or exc}", IO_REMEDY)


def new_directory(path: Path) -> None:
    """Create a directory (and its parents) that must not exist yet: FileExistsError if it
    does (callers tell "taken" from "broken" by it), any other failure is a refusal."""
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        raise
    except OSError as exc:
        raise io_failure("create", path, exc) from None


def read_file(path: Path) -> bytes | None:
    """The bytes of a file, None if there is none; any other failure (a directory, unreadable)
    is a refusal."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise io_failure("read", path, exc) from None


def fsync_path(path: Path) -> None:
    """fsync the file or directory at `path` (a directory's fsync makes its renames durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write temp, fsync, rename, fsync directory: readers see the old or the new file whole.
    A failure removes the temp file and is a refusal naming the path."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
        fsync_path(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise io_failure("write", path, exc) from None


def exclusive_create(path: Path, data: bytes) -> None:
    """Create `path` only if it does not exist (O_EXCL), durably; FileExistsError otherwise
    (callers tell "taken" from "broken" by it). Any other failure is a refusal, and a file this
    call created but could not fill is removed again."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise
    except OSError as exc:
        raise io_failure("create", path, exc) from None
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_path(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        raise io_failure("create", path, exc) from None


def create_new_or_same(path: Path, data: bytes, *, step: str, what: str, remedy: str) -> bool:
    """Create `path` with `data`: True when written, False when it already holds exactly these
    bytes; a refusal when it holds anything else (a file is never overwritten)."""
    try:
        exclusive_create(path, data)
    except FileExistsError:
        if read_file(path) == data:
            return False
        raise SetupError(step, f"{path} already exists and is not {what}", remedy) from None
    return True


def append_json_line(path: Path, entry: dict[str, Any]) -> None:
    """Append one JSON object as a line and fsync; the line is written with a single write()."""
    line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        is_new = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            _refuse_torn_tail(fd, path)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if is_new:
            fsync_path(path.parent)
    except OSError as exc:
        raise io_failure("append to", path, exc) from None


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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        is_new = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise io_failure("append to", path, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _refuse_torn_tail(fd, path)
            size = os.fstat(fd).st_size
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
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
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


@contextlib.contextmanager
def exclusive_lock(path: Path, *, step: str, holder: str) -> Iterator[None]:
    """A non-blocking flock held for the duration; a second holder is refused, not queued."""

    def refusal() -> SetupError:
        return SetupError(
            step,
            f"{holder} is in use by another automl-setup process "
            f"({exclusive_holder(path) or 'held shared by a launch or resume'})",
            "wait for it to finish; if no such process exists, the lock frees itself",
        )

    with _flock(path, fcntl.LOCK_EX, refusal) as fd:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        except OSError as exc:
            raise io_failure("lock", path, exc) from None
        yield


@contextlib.contextmanager
def _flock(path: Path, mode: int, refusal: Callable[[], SetupError]) -> Iterator[int]:
    """Hold `path` with flock `mode` (non-blocking) for the duration; `refusal()` when taken."""
    fd = _open_lock(path)
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            raise refusal() from None
        yield fd
    finally:
        os.close(fd)


def _open_lock(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise io_failure("lock", path, exc) from None


def exclusive_holder(path: Path) -> str | None:
    """Who holds `path`'s lock exclusively right now ("pid N"), or None when nobody does.

    Probed with a shared non-blocking flock on a read-only descriptor: it creates and writes
    nothing, and shared holders do not count. A flock dies with its process, so unlike a pid
    (which is reused) a held lock proves a live holder. Our own process counts too."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise io_failure("read", path, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def shared_lock(path: Path, *, step: str, holder: str) -> Iterator[None]:
    """The shared side of `exclusive_lock`: any number of shared holders at once (launches and
    resumes of different experiments), refused, not queued, while an exclusive holder (an
    install or repair) has it. A shared holder leaves the file's pid text alone."""

    def refusal() -> SetupError:
        return SetupError(
            step,
            f"an install (or repair) is in progress in {holder} "
            f"({exclusive_holder(path) or 'unknown'})",
            "wait for it to finish, then try again; if no such process exists, the lock "
            "frees itself",
        )

    with _flock(path, fcntl.LOCK_SH, refusal):
        yield
