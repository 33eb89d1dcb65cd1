"""The rules of every state access (see the package's docstring): a state folder reached from
its edge without following links, a state file opened through its folder's descriptor with
`O_NOFOLLOW`, untrusted state refused; and the plain opens and reads built on them."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from mcp_server.errors import SetupError
from mcp_server.fsutil.storage import storage_remedy

IO_REMEDY = (
    "check the path: permissions, free disk space, a read-only file system, an immutable "
    "attribute (lsattr), or a file or directory where the other is expected; then run the "
    "command again"
)


def io_failure(step: str, path: Path, exc: OSError) -> SetupError:
    """An OSError as a refusal naming the path and the system's own words for the cause."""
    # Opened through a folder's descriptor, the system names the file by its name alone.
    named = exc.filename not in (None, str(path), path.name) and not isinstance(exc.filename, int)
    other = f" ({exc.filename})" if named else ""
    remedy = storage_remedy(exc.errno, path) or IO_REMEDY
    return SetupError(step, f"cannot {step} {path}{other}: {exc.strerror or exc}", remedy)


STATE_DIR_NAME = ".automl-setup"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def link_refusal(step: str, path: Path) -> SetupError:
    try:
        target = str(path.readlink())
    except OSError:
        target = "?"
    return SetupError(
        step,
        f"{path} is a symbolic link (to {target}): automl-setup never reads or writes its state "
        "through a link; nothing was read or written through it",
        f"remove the link {path} (whoever can write into {path.parent} may have planted it), "
        "then run the command again; to keep state elsewhere, point the workspace, environment "
        "or store itself there",
    )


def _world_writable(st: os.stat_result) -> bool:
    # A sticky world-writable directory (/tmp) lets nobody replace another's entries.
    return bool(st.st_mode & stat.S_IWOTH) and not (
        stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
    )


def _foreign(st: os.stat_result, parent: os.stat_result) -> bool:
    # In a team's group-writable folder, a member's entry of the folder's group is expected.
    team = parent.st_mode & stat.S_IWGRP and st.st_gid == parent.st_gid
    return st.st_uid not in (os.geteuid(), 0, parent.st_uid) and not team


def _trusted(st: os.stat_result, parent: os.stat_result) -> bool:
    """`check_trusted`'s rule without its messages: a walk builds a refusal's path only when
    there is a refusal (state is opened thousands of times in a listing)."""
    return not _world_writable(st) and not _foreign(st, parent)


def check_trusted(st: os.stat_result, parent: os.stat_result, path: Path, step: str) -> None:
    """Refuse state others could have rewritten: writable by everyone (a sticky folder aside),
    or owned by someone other than this user, root or the owner of its directory, unless that
    directory is a team's (group-writable, the entry in its group)."""
    kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
    if _world_writable(st):
        raise SetupError(
            step,
            f"the state {kind} {path} is writable by everyone (mode {stat.S_IMODE(st.st_mode):o})"
            ": anyone could have replaced what automl-setup reads there; nothing was written",
            f"check it, then `chmod o-w {path}` (group-writable is fine for a shared workspace)",
        )
    if _foreign(st, parent):
        raise SetupError(
            step,
            f"the state {kind} {path} belongs to uid {st.st_uid}, not to this user (uid "
            f"{os.geteuid()}) nor to the owner of {path.parent} (uid {parent.st_uid}), and that "
            "folder is not a team's (group-writable, the same group); nothing was written",
            "check who made it and why; move it aside, then run the command again",
        )


def _edge_and_parts(path: Path, edge: Path | None) -> tuple[str, list[str]]:
    """The folder the walk starts from and the names below it. Strings, not pathlib (hence the
    noqa): its joins were most of the time of a listing that opens four state files per
    experiment."""
    full = os.path.normpath(os.path.abspath(path))  # noqa: PTH100
    names = [name for name in full.split(os.sep) if name]  # noqa: PTH206
    if edge is not None:
        root = os.path.normpath(os.path.abspath(edge))  # noqa: PTH100
        below = [name for name in root.split(os.sep) if name]  # noqa: PTH206
        if names[: len(below)] != below:
            raise ValueError(f"{full!r} is not in the subpath of {root!r}")
        return root, names[len(below) :]
    first = names.index(STATE_DIR_NAME) if STATE_DIR_NAME in names else len(names) - 1
    return os.sep + os.sep.join(names[:first]), names[first:]  # noqa: PTH118


def open_dir(path: Path, *, step: str, create: bool = False, edge: Path | None = None) -> int:
    """A descriptor of the state directory `path` (see the module's docstring); `create` makes
    missing components. FileNotFoundError when it is missing and not to be created."""
    top, parts = _edge_and_parts(path, edge)
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            raise
        Path(top).mkdir(parents=True, exist_ok=True)
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def here(depth: int) -> Path:  # the folder of parts[depth], for a refusal's message
        return Path(top, *parts[: depth + 1])

    try:
        for depth, name in enumerate(parts):
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)  # the umask decides the mode
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and here(depth).is_symlink():
                    raise link_refusal(step, here(depth)) from None
                raise
            try:
                found, parent = os.fstat(child), os.fstat(fd)
                if not _trusted(found, parent):
                    check_trusted(found, parent, here(depth), step)
            except BaseException:
                os.close(child)
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def state_dir(
    path: Path, *, step: str, create: bool = False, edge: Path | None = None
) -> Iterator[int]:
    """`open_dir` for the duration; any OSError is a refusal naming the path, but for
    FileNotFoundError when the directory is missing and not to be created."""
    try:
        fd = open_dir(path, step=step, create=create, edge=edge)
    except FileNotFoundError as exc:
        if not create:
            raise
        raise io_failure(step, path, exc) from None  # made, then removed by someone else
    except OSError as exc:
        raise io_failure(step, path, exc) from None
    try:
        yield fd
    finally:
        os.close(fd)


def open_at(dir_fd: int, path: Path, flags: int, *, step: str, mode: int = 0o644) -> int:
    """Open the file `path.name` in the directory `dir_fd` without following a link; an
    existing file must be trusted (`check_trusted`)."""
    try:
        fd = os.open(path.name, flags | NOFOLLOW, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EEXIST) and is_link_at(dir_fd, path.name):
            raise link_refusal(step, path) from None
        raise
    try:
        found = os.fstat(fd)
        if stat.S_ISDIR(found.st_mode):  # a folder where the file belongs
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        check_trusted(found, os.fstat(dir_fd), path, step)
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_link_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_state(
    path: Path, flags: int, *, step: str, create_dirs: bool = False, edge: Path | None = None
) -> int:
    """A descriptor of the state file `path`, opened with `flags` by the rules above. Any
    OSError is a refusal naming the path, but for the two answers a caller can act on:
    FileNotFoundError when the file (or its folder) is missing and not to be created, and
    FileExistsError when `O_EXCL` found it there."""
    try:
        with state_dir(path.parent, step=step, create=create_dirs, edge=edge) as dir_fd:
            return open_at(dir_fd, path, flags, step=step)
    except FileNotFoundError as exc:
        if not flags & os.O_CREAT:
            raise
        # To be created, yet missing: its folder is (no caller expects that as an answer).
        raise io_failure(step, path, exc) from None
    except FileExistsError as exc:
        if flags & os.O_EXCL:
            raise
        raise io_failure(step, path, exc) from None
    except OSError as exc:
        raise io_failure(step, path, exc) from None


def open_log(path: Path) -> int:
    """The append descriptor of a log automl-setup writes (or hands to the engine)."""
    return open_state(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, step="open log")


def open_reader(path: Path, *, edge: Path | None = None) -> IO[bytes]:
    """A binary reader of a state file (a log, a ledger, a stored wheel), by the rules above."""
    return os.fdopen(open_state(path, os.O_RDONLY, step="read", edge=edge), "rb")


def new_directory(path: Path) -> None:
    """Create a directory (and its parents) that must not exist yet: FileExistsError if it
    does (callers tell "taken" from "broken" by it), any other failure is a refusal."""
    try:
        with state_dir(path.parent, step="create", create=True) as dir_fd:
            os.mkdir(path.name, 0o777, dir_fd=dir_fd)
    except FileExistsError:
        raise
    except OSError as exc:
        raise io_failure("create", path, exc) from None


def read_file(path: Path, *, edge: Path | None = None) -> bytes | None:
    """The bytes of a state file, None if there is none; any other failure (a link, a
    directory, unreadable, untrusted) is a refusal."""
    try:
        fd = open_state(path, os.O_RDONLY, step="read", edge=edge)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            return handle.read()
        except OSError as exc:
            raise io_failure("read", path, exc) from None
