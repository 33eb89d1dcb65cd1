"""Which process a pid names: its start time, so that a pid the kernel has since given to
another process is never mistaken for the engine automl-setup started (and never signalled)."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def process_start(pid: int) -> str | None:
    """`<boot id>:<start time in clock ticks since boot>` of a live (or zombie) process, None
    when there is none. The pair names one process for the machine's lifetime: a reused pid
    has a later start time, a reboot a new boot id."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        boot = (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')': split after the
    # last one; start time is field 22 of the whole line, field 20 of what follows it.
    fields = stat.rpartition(")")[2].split()
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None
