"""Benchmark: reading an engine's dependency closure (mcp_server/environment/closure.py). Prints
figures; it is not a test.

The closure check runs on every verify, launch, resume and SLURM allocation: metadata and RECORD
files of every member, no file hashing. Measured on this project's own environment, the
closure of `automl-setup` itself (its base requirements) and with the `test` extra (a larger
closure, torch's RECORD included when torch is installed), median of --runs, each run a cold
read (a new site index) after one warm-up. `verify --deep` (every file of every member hashed)
is timed once for contrast. Target: <= 50 ms for a closure of 40 distributions.

Run: .venv/bin/python bench/closure.py [--runs N] [--python PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from mcp_server.environment.closure import dist_info_dir
from mcp_server.environment.probe import probe_interpreter
from mcp_server.environment.verify import check_installed_files

TARGET_MS, TARGET_SIZE = 50.0, 40


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--python", type=Path, default=Path(sys.executable))
    args = parser.parse_args()
    probe = probe_interpreter(args.python, ["automl-setup"])
    print(f"environment: {probe.prefix} (python {probe.python_version})")
    print(f"target: <= {TARGET_MS:.0f} ms for a closure of {TARGET_SIZE} distributions\n")
    print(f"{'closure':<28}{'members':>8}{'median ms':>11}{'ms/member':>11}{'min ms':>9}")
    for label, extras in (("automl-setup", []), ("automl-setup[test]", ["test"])):
        probe.closure("automl-setup", extras)  # warm the page cache, as a repeated verify is
        times, size = [], 0
        for _ in range(args.runs):
            start = time.perf_counter()
            size = len(probe.closure("automl-setup", extras))
            times.append((time.perf_counter() - start) * 1000)
        median = statistics.median(times)
        per = median / max(size, 1)
        print(f"{label:<28}{size:>8}{median:>11.1f}{per:>11.2f}{min(times):>9.1f}")
    closure = probe.closure("automl-setup", ["test"])
    start = time.perf_counter()
    files = 0
    for name in closure:
        folder = dist_info_dir([probe.purelib, probe.platlib], name)
        if folder is not None:
            files += check_installed_files(folder)[0]
    deep = time.perf_counter() - start
    print(f"\nverify --deep of the [test] closure: {files} files hashed in {deep:.2f} s (contrast)")


if __name__ == "__main__":
    main()
