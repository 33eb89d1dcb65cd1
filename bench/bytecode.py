"""Bytecode and the engine (issue 37): nothing automl-setup starts writes bytecode into an
environment at run time (`-I -B`), so it is written at install; what that costs, and what a
start without it would cost.

For install scenarios a (the small reference engine) and c (an engine requiring numpy, scipy,
scikit-learn and pandas): raw `uv pip install` from git into a fresh venv, without and with
`--compile-bytecode`, alternating, after an untimed warm-up (uv's cache warm: what differs is
the compiling); and automl-setup's own compile of the closure (environment/precompile.py) in
the plain venv, first and again (nothing left to compile: the next install's case). Then the
engine's first start as every launch starts it (`-I -B`, importing its console script's module)
in scenario a's environment: without bytecode (a plain uv install run with `-B`) and with it
(as an install by automl-setup leaves it).

    .venv/bin/python bench/bytecode.py [--runs 5] [--only a|c] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.installrepos import HEAVY, heavy_repository, run, small_repository
from mcp_server.children.uv import uv_binary
from mcp_server.environment.precompile import closure_sources, compile_sources
from mcp_server.source.sourcerepo import DEFAULT_SUBDIRECTORY, REFERENCE_DISTRIBUTION

START = "import automl_refengine.cli"


def install(url: str, commit: str, venv: Path, *, compiled: bool) -> float:
    """Seconds for `uv venv` and `uv pip install` of the engine at `commit` into `venv`."""
    shutil.rmtree(venv, ignore_errors=True)
    uv, python = uv_binary(), str(venv / "bin" / "python")
    spec = f"{REFERENCE_DISTRIBUTION} @ git+{url}@{commit}#subdirectory={DEFAULT_SUBDIRECTORY}"
    started = time.perf_counter()
    run([uv, "venv", "--quiet", "--python", sys.executable, "--", str(venv)])
    run([uv, "pip", "install", "--quiet", "--python", python, spec,
         *(["--compile-bytecode"] if compiled else [])])  # fmt: skip
    return time.perf_counter() - started


def precompile(venv: Path) -> float:
    """Seconds for automl-setup's compile of every distribution in the venv (the closure)."""
    (site,) = venv.glob("lib/python*/site-packages")
    names = [d.name.split("-")[0] for d in site.glob("*.dist-info")]
    started = time.perf_counter()
    compile_sources(venv / "bin" / "python", closure_sources([site], names, venv))
    return time.perf_counter() - started


def first_start(venv: Path, runs: int) -> float:
    """Median seconds of the engine's start as a launch starts it, writing no bytecode."""
    python = str(venv / "bin" / "python")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([python, "-I", "-B", "-c", START], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=["a", "c"])
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-bytecode-"))
    print(f"runs {args.runs}; uv {uv_binary()}; workdir {workdir}")
    scenarios = {"a": ("small repository", small_repository),
                 "c": (f"heavy deps ({', '.join(HEAVY)})", heavy_repository)}  # fmt: skip
    venv = workdir / "venv"
    for name, (title, make) in scenarios.items():
        if args.only not in (None, name):
            continue
        url, commit = make(workdir / name)
        install(url, commit, venv, compiled=True)  # warm-up: uv's cache holds everything
        plain, compiled = [], []
        for _ in range(args.runs):
            plain.append(install(url, commit, venv, compiled=False))
            compiled.append(install(url, commit, venv, compiled=True))
        a, b = statistics.median(plain), statistics.median(compiled)
        print(f"install {name} ({title}): plain {a:.2f} s, --compile-bytecode {b:.2f} s "
              f"({b / a:.2f}x)")  # fmt: skip
        install(url, commit, venv, compiled=False)
        first, again = precompile(venv), precompile(venv)
        print(f"  automl-setup's compile of the closure: {first:.2f} s, again {again:.2f} s")
        if name == "a":
            install(url, commit, venv, compiled=False)
            without = first_start(venv, args.runs * 3)
            install(url, commit, venv, compiled=True)
            with_ = first_start(venv, args.runs * 3)
            extra = (without - with_) * 1000
            print(f"engine start (-I -B, {START!r}): without bytecode {without * 1000:.0f} ms, "
                  f"with {with_ * 1000:.0f} ms ({extra:+.0f} ms a start)")  # fmt: skip
    shutil.rmtree(venv, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
