"""flock-based locks of state files: exclusive and shared, never queued, and who holds one."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from mcp_server.errors import SetupError
from mcp_server.fsutil.statedir import io_failure, open_state


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
    fd = open_lock(path)
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            raise refusal() from None
        except OSError as exc:  # e.g. ENOLCK: a network file system without locks
            raise io_failure("lock", path, exc) from None
        yield fd
    finally:
        os.close(fd)


def open_lock(path: Path) -> int:
    """The read-write descriptor of a lock file (made if missing), by the rules above."""
    return open_state(path, os.O_RDWR | os.O_CREAT, step="lock", create_dirs=True)


def exclusive_holder(path: Path) -> str | None:
    """Who holds `path`'s lock exclusively right now ("pid N"), or None when nobody does.

    Probed with a shared non-blocking flock on a read-only descriptor: it creates and writes
    nothing, and shared holders do not count. A flock dies with its process, so unlike a pid
    (which is reused) a held lock proves a live holder. Our own process counts too."""
    try:
        fd = open_state(path, os.O_RDONLY, step="read")
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
        return None
    except OSError as exc:
        raise io_failure("read", path, exc) from None
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
