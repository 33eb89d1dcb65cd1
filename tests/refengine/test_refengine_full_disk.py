"""The reference engine's own ledger on a real tmpfs that fills (tests/support/mounts.py): an
append the disk cannot hold (a short write, then ENOSPC) raises and leaves the ledger ending
after a whole line, so a resume finds no torn line to refuse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.mounts import tmpfs

ENGINE_SRC = Path(__file__).resolve().parents[2] / "mcp_server" / "reference_engine" / "src"

# Appends until the ledger's last page has room for part of a line only, fills the disk, and
# appends once more: prints the errno, whether the bytes are unchanged, and the events read.
_SCRIPT = r"""
import os, sys
from pathlib import Path
from automl_refengine.ledger import LedgerWriter, SessionStarted, read_events
path = Path(sys.argv[1])
writer = LedgerWriter(path, next_seq=1)
fields = dict(experiment_id="x", mode="run", pid=1, engine_version="0", manifest_sha256="a" * 64)
while True:
    writer.append(SessionStarted, **fields)
    size = os.path.getsize(path)
    line = size // (writer.next_seq - 1) + 2  # the next line is as long, give or take
    if 0 < -size % 4096 < line:
        break
free = os.statvfs(path.parent)
fd = os.open(path.parent / "ballast", os.O_WRONLY | os.O_CREAT)
os.posix_fallocate(fd, 0, free.f_bavail * free.f_frsize)
os.close(fd)
before = path.read_bytes()
try:
    writer.append(SessionStarted, **fields)
    print("written")
except OSError as exc:
    print(exc.errno)
print(path.read_bytes() == before, len(read_events(path)), writer.next_seq)
"""


def test_a_ledger_append_the_disk_cannot_hold_leaves_whole_lines(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", size="1m") as mount:
        done = subprocess.run(
            [sys.executable, "-B", "-c", _SCRIPT, str(mount / "ledger.jsonl")],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "PYTHONPATH": str(ENGINE_SRC)},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    errno_seen, summary = done.stdout.splitlines()
    assert errno_seen == "28"  # ENOSPC
    unchanged, events, next_seq = summary.split()
    assert unchanged == "True"
    assert int(next_seq) == int(events) + 1  # the failed event's number is not used up
