"""The engine's bytecode that no RECORD vouches for (`verify --deep`). automl-setup never writes
bytecode into an environment (its children run `-I -B`), but others may have (a full disk cut
one short, an older tool, a hand-run `python`, an edit). Python loads a `__pycache__` file in
place of its source whenever its header matches the source, so such a file is checked as
Python would load it: one it would load must unmarshal and hold exactly the code its source
compiles to. A stale one (its header no longer matches) is ignored by Python and passes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from mcp_server.children.run import run_captured
from mcp_server.environment.records import FieldDiff

CHECK_TIMEOUT_S = 300.0
RECORDED = "absent, or compiled from its source"

# Whether Python would run the bytecode `data` (its first 16 bytes suffice) in place of
# `source`: importlib's own header checks. A part of the scripts run in an environment's
# interpreter (any Python >= 3.8), here and in precompile.py.
LOADED_BY_PYTHON = r"""
import os
from importlib.util import MAGIC_NUMBER, source_hash
def loaded(source, data):
    if len(data) < 16 or data[:4] != MAGIC_NUMBER:
        return False
    flags = int.from_bytes(data[4:8], "little")
    if flags & 1:
        if not flags & 2:  # unchecked hash-based: always loaded
            return True
        with open(source, "rb") as f:
            return data[8:16] == source_hash(f.read())
    st = os.stat(source)
    return (int.from_bytes(data[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(data[12:16], "little") == st.st_size & 0xFFFFFFFF)
"""

# Runs in the environment's own interpreter (its magic number, cache tag and compiler),
# isolated and writing nothing: stdin {"sources": [...], "recorded": [...]}, stdout
# [[pyc, problem], ...].
_CHECK = (
    LOADED_BY_PYTHON
    + r"""
import json, marshal, sys
from importlib.util import cache_from_source
job = json.load(sys.stdin)
recorded, found = set(job["recorded"]), []
for source in job["sources"]:
    for level in ("", 1, 2):
        pyc = cache_from_source(source, optimization=level)
        if pyc in recorded:
            continue
        try:
            with open(pyc, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        except OSError as exc:
            found.append([pyc, "unreadable: " + str(exc.strerror)])
            continue
        if not loaded(source, data):
            continue
        try:
            code = marshal.loads(data[16:])
        except Exception as exc:
            found.append([pyc, "cut short or damaged (%s: %s)" % (type(exc).__name__, exc)])
            continue
        with open(source, "rb") as f:
            text = f.read()
        if code != compile(text, source, "exec", dont_inherit=True, optimize=level or 0):
            found.append([pyc, "not compiled from its source: Python runs it instead"])
print(json.dumps(found))
"""
)


def stray_bytecode(interpreter: Path, root: Path, record: list[str]) -> list[tuple[str, str]]:
    """(the file, its problem) for each bytecode file of the distribution whose RECORD paths
    (relative to `root`, site-packages) are `record` that Python would load and that is not
    what its source compiles to; an empty list when all is well."""
    paths = [os.path.normpath(root / p) for p in record]
    job = {"sources": [p for p in paths if p.endswith(".py")], "recorded": paths}
    try:
        done = run_captured(
            [str(interpreter), "-I", "-B", "-c", _CHECK], input=json.dumps(job),
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
