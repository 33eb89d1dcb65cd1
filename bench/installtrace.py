"""Where an `automl-setup install` spends its time: run as a script, it runs the command line
in this process with every child process timed (start to reaping), and writes the times.

  python bench/installtrace.py OUT.json install ARGS...

Run with its working directory at the automl-setup tree to measure (its `mcp_server` is
imported). Times are `time.perf_counter()`, CLOCK_MONOTONIC on Linux, so the benchmark compares
them with its own: the interpreter's start is the gap before `started`. Not used for the timed
runs: the benchmark runs it separately, so its few microseconds per child never count there.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def label(args: Any) -> str:
    """What a child is, in a word or two: `uv build`, `uv pip`, `git`, `python` (a probe)."""
    argv = [str(a) for a in args] if isinstance(args, list | tuple) else [str(args)]
    name = Path(argv[0]).name
    if name == "uv":  # its subcommand, or its first flag (`uv --version`)
        return " ".join(["uv", *argv[1:2]])
    return "python" if name.startswith("python") else name


def _trace(out: Path, argv: list[str]) -> int:
    started = time.perf_counter()
    children: list[tuple[str, float, float]] = []
    init, handle = subprocess.Popen.__init__, subprocess.Popen._handle_exitstatus  # type: ignore[attr-defined]

    def traced_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        self._bench = (label(args), time.perf_counter())  # type: ignore[attr-defined]
        init(self, args, *rest, **kw)

    def traced_handle(self: subprocess.Popen[Any], *rest: Any, **kw: Any) -> None:
        handle(self, *rest, **kw)
        name, begun = self._bench  # type: ignore[attr-defined]
        children.append((name, begun, time.perf_counter()))

    subprocess.Popen.__init__ = traced_init  # type: ignore[method-assign]
    subprocess.Popen._handle_exitstatus = traced_handle  # type: ignore[attr-defined]
    from mcp_server.faces.cli.main import main

    imported = time.perf_counter()
    try:
        return main(argv)
    finally:
        data = {"started": started, "imported": imported, "ended": time.perf_counter()}
        out.write_text(json.dumps({**data, "children": children}), encoding="utf-8")


@dataclass(frozen=True)
class Shares:
    """One traced install: seconds by where they went (children overlap each other, so the
    kinds are each kind's union, and `ours` is what no child covers)."""

    total: float
    by_kind: dict[str, float]
    start: float  # interpreter start, before the first line of the trace ran
    imports: float  # importing the command line
    ours: float  # automl-setup's own work: the total less every child's time

    @property
    def uv(self) -> float:
        return sum(v for k, v in self.by_kind.items() if k.startswith("uv"))


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def shares(trace: Path, spawned: float, exited: float) -> Shares:
    data = json.loads(trace.read_text(encoding="utf-8"))
    children = [(name, a, b) for name, a, b in data["children"]]
    kinds: dict[str, list[tuple[float, float]]] = {}
    for name, a, b in children:
        kinds.setdefault(name, []).append((a, b))
    every = _union([(a, b) for _n, a, b in children])
    return Shares(
        total=exited - spawned,
        by_kind={k: _union(v) for k, v in sorted(kinds.items())},
        start=data["started"] - spawned,
        imports=data["imported"] - data["started"],
        ours=exited - spawned - every,
    )


def summary(runs: list[Shares]) -> str:
    """Medians of the traced runs, in one line."""

    def med(values: list[float]) -> float:
        return statistics.median(values)

    total = med([r.total for r in runs])
    uv = med([r.uv for r in runs])
    kinds = sorted({k for r in runs for k in r.by_kind})
    parts = ", ".join(f"{k} {med([r.by_kind.get(k, 0.0) for r in runs]):.2f}" for k in kinds)
    ours = med([r.ours for r in runs])
    return (
        f"{total:.2f} s: uv {uv:.2f} s ({uv / total:.0%}); by child: {parts}; automl-setup's "
        f"own {ours:.2f} s ({ours / total:.0%}: interpreter start "
        f"{med([r.start for r in runs]):.2f}, the command line's import "
        f"{med([r.imports for r in runs]):.2f}, the rest its work between and after the "
        "children, the operation's modules imported on demand included)"
    )


if __name__ == "__main__":
    # The tree in the working directory is the one measured, never bench/ (whose mcp.py would
    # shadow the MCP SDK's package).
    sys.path[0] = os.getcwd()
    sys.exit(_trace(Path(sys.argv[1]), sys.argv[2:]))
