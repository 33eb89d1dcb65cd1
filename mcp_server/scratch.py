"""Scratch directories in the temp dir (`<prefix><pid>-*`): a SIGKILL skips every cleanup, so
each new scratch directory first sweeps those of its kind whose process is gone."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(prefix: str) -> None:
    """Remove `<prefix><pid>-*` directories of processes that are gone: nothing is left behind."""
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        pid_text = path.name.removeprefix(prefix).split("-", 1)[0]
        if pid_text.isdigit() and not pid_alive(int(pid_text)):
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A fresh `<prefix><pid>-*` directory, removed on exit (and by a later sweep if killed)."""
    sweep_stale(prefix)
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
