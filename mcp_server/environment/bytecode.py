"""The engine's bytecode that no RECORD vouches for (`verify --deep`). automl-setup never writes
bytecode into an environment (its children run `-I -B`), but others may have (a full disk cut
one short, an older tool, a hand-run `python`, an edit). Python loads a `__pycache__` file in
place of its source whenever its header matches the source, so such a file is checked as
Python would load it: one it would load must unmarshal and hold exactly the code its source
compiles to (target_side/bytecode.py `check`, in the environment's own interpreter). A stale
one (its header no longer matches) is ignored by Python and passes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from mcp_server.children.run import run_captured
from mcp_server.environment.records import FieldDiff
from mcp_server.target_side import command

CHECK_TIMEOUT_S = 300.0
RECORDED = "absent, or compiled from its source"


def stray_bytecode(interpreter: Path, root: Path, record: list[str]) -> list[tuple[str, str]]:
    """(the file, its problem) for each bytecode file of the distribution whose RECORD paths
    (relative to `root`, site-packages) are `record` that Python would load and that is not
    what its source compiles to; an empty list when all is well."""
    paths = [os.path.normpath(root / p) for p in record]
    job = {"sources": [p for p in paths if p.endswith(".py")], "recorded": paths}
    try:
        done = run_captured(
            command(interpreter, "bytecode", "check"), input=json.dumps(job),
            timeout=CHECK_TIMEOUT_S,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [("(bytecode check)", f"could not run in the environment: {exc}")]
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return [("(bytecode check)", f"could not run in the environment: {last}")]
    return [(pyc, problem) for pyc, problem in json.loads(done.stdout)]


def bytecode_diffs(found: list[tuple[str, str]]) -> list[FieldDiff]:
    return [FieldDiff(field=f"bytecode {pyc}", recorded=RECORDED, found=p) for pyc, p in found]


def remove_command(found: list[tuple[str, str]]) -> list[str]:
    """The command that removes the bytecode files found (Python then runs their sources, as
    it would have; automl-setup never writes them back)."""
    files = [pyc for pyc, _problem in found if pyc.endswith(".pyc")]
    return [f"rm -f -- {' '.join(shlex.quote(f) for f in files)}"] if files else []
