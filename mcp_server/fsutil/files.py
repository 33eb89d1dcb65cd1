"""Durable state files: exclusive create, atomic replace (an unpredictable temp name in the
target's own folder), copies into a folder's descriptor, and the writability probe."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from mcp_server.errors import SetupError
from mcp_server.fsutil.statedir import (
    NOFOLLOW,
    check_trusted,
    io_failure,
    link_refusal,
    open_at,
    read_file,
    state_dir,
)


@contextlib.contextmanager
def locked_directory(directory: Path, *, shared: bool = False) -> Iterator[None]:
    """A blocking flock (exclusive, or `shared`) of a directory a user named, such as the one a
    new environment is made in: not state, so its path is followed like any path given. An
    OSError is a refusal naming the directory."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise io_failure("lock", directory, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        except OSError as exc:
            raise io_failure("lock", directory, exc) from None
        yield
    finally:
        os.close(fd)


def probe_writable(directory: Path) -> None:
    """Create and remove an unpredictably named file in `directory` (not a state folder: where
    uv will write): OSError when it cannot be written, which os.access does not see for root,
    a read-only mount or an immutable directory."""
    probe = directory / f".automl-setup-probe-{secrets.token_hex(8)}"
    os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600))
    probe.unlink()


def fsync_path(path: Path) -> None:
    """fsync the file or directory at `path` (a directory's fsync makes its renames durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new_at(
    dir_fd: int, path: Path, data: bytes, *, step: str, mode: int = 0o644, durable: bool = True
) -> None:
    """Create the file `path.name` in `dir_fd` exclusively (never through a link) with `data`,
    fsynced if `durable`; FileExistsError when it exists."""
    fd = open_at(dir_fd, path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, step=step, mode=mode)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def copy_new_at(dir_fd: int, path: Path, source: Path, *, step: str, mode: int) -> None:
    """Create the file `path.name` in `dir_fd` exclusively, with the bytes of `source` (a file
    the caller names, such as a wheel to store), fsynced."""
    fd = open_at(dir_fd, path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, step=step, mode=mode)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        shutil.copyfileobj(src, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write an unpredictably named temp file exclusively beside `path`, fsync, rename, fsync
    the directory: readers see the old or the new file whole. A link or an untrusted file at
    `path` is refused; any failure removes the temp file and is a refusal naming the path.
    Without `durable` nothing is fsynced (a cache, whose reader distrusts a damaged file)."""
    step = "write"
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(8)}")
    with state_dir(path.parent, step=step, create=True) as dir_fd:
        try:
            _refuse_untrusted_target(dir_fd, path, step)
            write_new_at(dir_fd, tmp, data, step=step, durable=durable)
            os.replace(tmp.name, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            if durable:
                os.fsync(dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp.name, dir_fd=dir_fd)
            raise io_failure(step, path, exc) from None


def _refuse_untrusted_target(dir_fd: int, path: Path, step: str) -> None:
    """The file a rename would replace: never a link, never one others could have made."""
    try:
        st = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise link_refusal(step, path)
    check_trusted(st, os.fstat(dir_fd), path, step)


def exclusive_create(path: Path, data: bytes) -> None:
    """Create `path` only if it does not exist (O_EXCL), durably; FileExistsError otherwise
    (callers tell "taken" from "broken" by it; a link there is refused instead). Any other
    failure is a refusal, and a file this call created but could not fill is removed again."""
    step = "create"
    with state_dir(path.parent, step=step, create=True) as dir_fd:
        try:
            fd = open_at(dir_fd, path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, step=step)
        except FileExistsError:
            raise
        except OSError as exc:
            raise io_failure(step, path, exc) from None
        try:
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.fsync(dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(path.name, dir_fd=dir_fd)
            raise io_failure(step, path, exc) from None


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
