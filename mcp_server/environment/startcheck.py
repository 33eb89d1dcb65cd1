"""Whether the installed engine starts: the entry points of its console scripts imported by the
environment's own interpreter (target_side/startcheck.py, `-I -B`: isolated and writing
nothing), as every launch would import them. A file verify cannot see (bytecode a full disk
cut short) can keep an engine whose every recorded file matches from starting; this says so,
with the exception's last line.

A start proven is remembered by this process (the MCP server answers `verify_engine` many
times) with what the imports depended on, by each file's and folder's inode, size and mtime:
while none of them changed (a write changes an mtime, a rename into place an inode) the proof
stands without starting the interpreter again (bench/README.md: the figures). Not the
ctime: uv and the bytecode cache hard-link shared files, and every new link to one, in any
environment, changes that inode's ctime."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from mcp_server.children.run import run_captured
from mcp_server.target_side import command

IMPORT_TIMEOUT_S = 60.0
Stat = tuple[int, int, int, int]

_proven: dict[tuple[str, str], dict[str, Stat | None]] = {}


def _stat(path: str) -> Stat | None:
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


def _still_proven(key: tuple[str, str]) -> bool:
    seen = _proven.get(key)
    return seen is not None and all(_stat(path) == was for path, was in seen.items())


def _remember(key: tuple[str, str], interpreter: Path, stdout: str, began: int) -> None:
    """The proof, unless what it depended on cannot be told (the engine printed at import) or
    changed while it ran."""
    try:
        paths = [str(interpreter), *json.loads(stdout.strip().splitlines()[-1])]
    except (ValueError, IndexError):
        return
    seen = {path: _stat(path) for path in paths}
    if all(st is None or st[3] < began for st in seen.values()):
        _proven[key] = seen


def start_failure(interpreter: Path, distribution: str) -> str | None:
    """Why the engine's entry points do not import (the exception's last line), or None."""
    key = (str(interpreter), distribution)
    if _still_proven(key):
        return None
    _proven.pop(key, None)
    began = time.time_ns()
    try:
        done = run_captured(
            command(interpreter, "startcheck", distribution), timeout=IMPORT_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return f"importing its entry points took longer than {IMPORT_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"its interpreter cannot run: {exc.strerror}"
    if done.returncode == 0:
        _remember(key, interpreter, done.stdout, began)
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"its interpreter exited with status {done.returncode}"
