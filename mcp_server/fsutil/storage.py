"""Storage that fails as a whole, not a path: a full file system (ENOSPC), a used-up quota
(EDQUOT), a read-only mount (EROFS). Each has its own remedy, naming the tool that shows it,
whether the OSError is automl-setup's own or a child's (uv says `(os error 28)`)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

from mcp_server.errors import SetupError

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def storage_remedy(code: int | None, path: Path) -> str | None:
    """What to do when the storage holding `path` is full, over quota or read-only; None for
    any other cause."""
    if code not in STORAGE_ERRNOS:
        return None
    return _remedy(code, _where(path))


def _where(path: Path) -> str:
    """The folder to ask `df` or `findmnt` about, quoted for a shell."""
    return shlex.quote(str(path if path.is_dir() else path.parent))


def _remedy(code: int, where: str) -> str:
    if code == errno.ENOSPC:
        return (
            f"free space on the file system holding {where} (`df -h {where}`; `df -i {where}` "
            "for inodes), then run the command again: nothing was half-written"
        )
    if code == errno.EDQUOT:
        return (
            f"your disk quota on the file system holding {where} is used up (`quota -s`, or "
            "your site's quota tool): free some of it or ask for more, then run the command "
            "again: nothing was half-written"
        )
    return (
        f"the file system holding {where} is mounted read-only (`findmnt -T {where}`), as "
        "storage trouble leaves it: run the command again once it is writable (ask its "
        "admins), or use a writable workspace or environment"
    )


_STRERRORS = {os.strerror(code): code for code in STORAGE_ERRNOS}
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_PATH = re.compile(r"[`'](/[^`']+)[`']")  # uv quotes a path in backticks, Python in quotes


def storage_cause(text: str, where: Path) -> tuple[int, Path] | None:
    """The storage errno a child's output reports (uv's `(os error N)`, or the system's words),
    and the first absolute path it quotes (else `where`, where the child writes); or None."""
    codes = [int(n) for n in _OS_ERROR.findall(text)]
    codes += [code for words, code in _STRERRORS.items() if words in text]
    found = next((code for code in codes if code in STORAGE_ERRNOS), None)
    if found is None:
        return None
    path = _PATH.search(text)
    return found, Path(path.group(1)) if path else where


@contextlib.contextmanager
def storage_refusals(step: str) -> Iterator[None]:
    """An OSError no state access caught (uv's scratch, a rollback's copy) as a refusal of the
    operation `step` when the storage is full, over quota or read-only; any other is a bug and
    passes."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in STORAGE_ERRNOS:
            raise
        path = Path(exc.filename) if isinstance(exc.filename, (str, os.PathLike)) else Path.cwd()
        cause = f"cannot write {path}: {exc.strerror or exc}"
        raise SetupError(step, cause, _remedy(exc.errno, _where(path))) from None
