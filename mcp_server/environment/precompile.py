"""Bytecode written once, at install, for the engine and its dependency closure: every engine
process automl-setup starts runs `-I -B` and writes nothing into the environment (a full disk
at run time cannot poison it), yet starts from bytecode (bench/bytecode.py: without it a start
of the reference engine takes twice as long, every plan, run, status and trial).

Not uv's `--compile-bytecode`: that recompiles the whole site-packages on every install (12x a
plain install of an engine with numpy, scipy, scikit-learn and pandas) and ignores errors,
and CPython's own writer does not check for a short write (a full disk left a truncated `.pyc`
renamed into place). Here only the closure's files without up-to-date bytecode are compiled,
by the environment's own interpreter (target_side/bytecode.py `compile`), each file written
whole (a short write is continued, a full disk raises) under a temporary name and renamed into
place; a failure refuses the install, which rolls back."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mcp_server.children.run import run_captured
from mcp_server.environment.closure import dist_info_dir
from mcp_server.environment.verify import installed_paths
from mcp_server.errors import SetupError
from mcp_server.fsutil import storage_remedy
from mcp_server.fsutil.statedir import IO_REMEDY
from mcp_server.target_side import command

COMPILE_TIMEOUT_S = 1800.0

# A distribution's own test suite (pandas and scipy ship thousands of files) is not imported
# by an engine: it is left out; Python compiles such a file in memory if it ever is imported.
TEST_FOLDERS = frozenset({"tests", "test"})


def closure_sources(site_folders: list[Path], names: list[str], prefix: Path) -> list[str]:
    """The `.py` files the RECORDs of `names` list inside the environment, once each, but a
    test suite's."""
    found: set[str] = set()
    for name in names:
        dist_info = dist_info_dir(site_folders, name)
        if dist_info is not None:
            found.update(
                str(p)
                for p in installed_paths(dist_info)
                if p.suffix == ".py" and prefix in p.parents and not TEST_FOLDERS & set(p.parts)
            )
    return sorted(found)


def compile_sources(interpreter: Path, sources: list[str]) -> int:
    """Compile `sources` without up-to-date bytecode, split over the machine's cores: how many
    were compiled. A write that fails is a refusal naming the file and the storage's remedy."""
    workers = max(1, min(os.cpu_count() or 1, len(sources) // 200 or 1))
    chunks = [sources[n::workers] for n in range(workers)]
    argv = command(interpreter, "bytecode", "compile")

    def compile_chunk(chunk: list[str]) -> subprocess.CompletedProcess[str]:
        return run_captured(argv, input=json.dumps(chunk), timeout=COMPILE_TIMEOUT_S)

    try:  # started together, each given its list on stdin
        with ThreadPoolExecutor(max_workers=workers) as pool:
            procs = list(pool.map(compile_chunk, chunks))
    except subprocess.TimeoutExpired:
        raise SetupError(
            "install",
            f"compiling the engine's bytecode took longer than {COMPILE_TIMEOUT_S:.0f} s",
            "check the machine's load and run the install again",
        ) from None
    compiled = 0
    for proc in procs:
        try:
            answer = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise SetupError(
                "install",
                f"compiling the engine's bytecode failed in the environment: {last}",
                "run the install again; if it fails the same way, report it with this line",
            ) from None
        compiled += answer["compiled"]
        if "error" in answer:
            code, strerror, filename = answer["error"]
            raise SetupError(
                "install",
                f"cannot write the bytecode {filename}: {strerror}",
                storage_remedy(code, Path(filename)) or IO_REMEDY,
            )
    return compiled
