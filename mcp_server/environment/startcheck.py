"""Whether the installed engine starts: the entry points of its console scripts imported by the
environment's own interpreter (target_side/startcheck.py, `-I -B`: isolated and writing
nothing), as every launch would import them. A file verify cannot see (bytecode a full disk
cut short) can keep an engine whose every recorded file matches from starting; this says so,
with the exception's last line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mcp_server.children.run import run_captured
from mcp_server.target_side import command

IMPORT_TIMEOUT_S = 60.0


def start_failure(interpreter: Path, distribution: str) -> str | None:
    """Why the engine's entry points do not import (the exception's last line), or None."""
    try:
        done = run_captured(
            command(interpreter, "startcheck", distribution), timeout=IMPORT_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return f"importing its entry points took longer than {IMPORT_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"its interpreter cannot run: {exc.strerror}"
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"its interpreter exited with status {done.returncode}"
