"""Which kind of `.pyc` the bytecode cache links (issue 45, environment/bytecache.py): the start
of a process importing a real pure-Python closure (this project's MCP server: mcp, pydantic,
httpx, anyio, starlette and their dependencies, about 300 modules) with `-I -B`, as every
process automl-setup starts runs, from timestamp pycs, checked-hash pycs (PEP 552: the source
is read and hashed at each import) and unchecked-hash pycs (never checked against the source),
and with no bytecode at all. The closure is copied from this venv's site-packages into a
scratch folder per kind, compiled there with `compileall`, and imported alternately.

    .venv/bin/python bench/pyckinds.py [--runs 15] [--module mcp.server.mcpserver]
"""

from __future__ import annotations

import argparse
import compileall
import py_compile
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

KINDS = {
    "timestamp": py_compile.PycInvalidationMode.TIMESTAMP,
    "checked hash": py_compile.PycInvalidationMode.CHECKED_HASH,
    "unchecked hash": py_compile.PycInvalidationMode.UNCHECKED_HASH,
    "no bytecode": None,
}


def start(site: Path, module: str) -> float:
    """Seconds for `python -I -B` to import `module` from `site` alone."""
    code = f"import sys; sys.path.insert(0, {str(site)!r}); import {module}"
    began = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-B", "-c", code], check=True)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--module", default="mcp.server.mcpserver")
    args = parser.parse_args()
    here = Path(sysconfig.get_paths()["purelib"])
    with tempfile.TemporaryDirectory() as scratch:
        sites = {}
        for n, (kind, mode) in enumerate(KINDS.items()):
            site = Path(scratch) / str(n)
            shutil.copytree(here, site, ignore=shutil.ignore_patterns("__pycache__", "*.pth"))
            if mode is not None:
                compileall.compile_dir(site, quiet=1, workers=0, invalidation_mode=mode)
            sites[kind] = site
        count = len(list(sites["timestamp"].rglob("*.pyc")))
        for site in sites.values():
            start(site, args.module)  # warm the page cache
        times: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for _ in range(args.runs):
            for kind, site in sites.items():
                times[kind].append(start(site, args.module))
    print(f"import {args.module} with -I -B, {count} pycs in the closure, median of {args.runs}")
    base = statistics.median(times["timestamp"])
    for kind, found in times.items():
        median = statistics.median(found)
        print(f"  {kind:15} {median * 1000:7.1f} ms  ({median / base:.2f}x timestamp)")


if __name__ == "__main__":
    main()
