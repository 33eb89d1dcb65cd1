"""The sides bench/install.py times: automl-setup (this tree, and optionally another tree as
the baseline) and raw uv, each from the same state before every run."""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.installrepos import BenchError, run
from bench.installtrace import Shares, shares, summary
from mcp_server.children.uv import uv_binary
from mcp_server.source.sourcerepo import DEFAULT_SUBDIRECTORY, REFERENCE_DISTRIBUTION

HERE = Path(__file__).resolve().parent
TREE = HERE.parent  # the automl-setup tree measured, unless a side names another
SETUP, BASELINE, RAW = "automl-setup", "baseline", "raw uv"
# Issue 45: automl-setup with its bytecode cache emptied before each run, against uv compiling.
SETUP_COLD, RAW_COMPILED = "automl-setup, empty bytecode cache", "uv --compile-bytecode"


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    url: str
    commit: str
    limit: float  # the target ratio automl-setup / raw uv
    inclusive: bool  # True: ratio <= limit passes; False: ratio < limit passes
    cold_limit: float | None = None  # target SETUP_COLD / RAW_COMPILED (issue 45)

    @property
    def target(self) -> str:
        return f"{'<=' if self.inclusive else '<'} {self.limit:.2f}x"

    def passes(self, ratio: float) -> bool:
        return ratio <= self.limit if self.inclusive else ratio < self.limit


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    medians: dict[str, float]  # by side
    raw_uv_cached: float  # raw uv when the commit is already fetched and built in its cache
    where: dict[str, str] = field(default_factory=dict)  # by side: where its time went

    def ratio(self, side: str = SETUP, over: str = RAW) -> float:
        return self.medians[side] / self.medians[over]


class Bench:
    def __init__(
        self, workdir: Path, cache_dir: Path, *, offline: bool, baseline: Path | None
    ) -> None:
        self.envs = workdir / "envs"
        self.store = workdir / "store"  # automl-setup's wheel store and bytecode cache
        self.cache_dir = cache_dir
        self.offline = offline
        self.baseline = baseline
        self.uv = uv_binary()
        self.count = 0

    def environment(self, *, warm_up: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_OFFLINE")}
        env["UV_CACHE_DIR"] = str(self.cache_dir)
        env["AUTOML_SETUP_STORE"] = str(self.store)
        if self.offline and not warm_up:
            env["UV_OFFLINE"] = "1"
        return env

    def reset(self) -> None:
        """Untimed, before every run of either side: uv must fetch and build the commit, and
        no write-back left by the previous run (hundreds of MB in b and c) lands in the next."""
        run(
            [self.uv, "cache", "clean", "--quiet", REFERENCE_DISTRIBUTION],
            env=self.environment(warm_up=True),
        )
        for path in self.cache_dir.glob("git-v*"):
            shutil.rmtree(path)
        os.sync()

    def check_git_cache_used(self) -> None:
        """The reset above is only meaningful if uv keeps its git checkouts there."""
        if not any(self.cache_dir.glob("git-v*")):
            raise BenchError(f"uv left no git-v* folder in {self.cache_dir}: its layout changed")

    def _venv(self) -> Path:
        self.count += 1
        path = self.envs / f"venv-{self.count:03d}"
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _timed(
        self, commands: list[list[str]], venv: Path, *, warm_up: bool, cwd: Path | None = None
    ) -> tuple[float, float]:
        """(start, end) of the commands, run one after the other."""
        env = self.environment(warm_up=warm_up)
        started = time.perf_counter()
        for argv in commands:
            run(argv, env=env, cwd=cwd)
        ended = time.perf_counter()
        shutil.rmtree(venv)
        return started, ended

    def automl_setup(
        self,
        scenario: Scenario,
        *,
        warm_up: bool = False,
        tree: Path = TREE,
        trace: Path | None = None,
        cold: bool = False,
    ) -> tuple[float, float]:
        """The CLI of `tree` (its working directory, so `-m` imports that tree's modules);
        `cold`: with the bytecode cache emptied first (untimed)."""
        venv = self._venv()
        if cold:
            shutil.rmtree(self.store / "bytecode", ignore_errors=True)
        start = [sys.executable, "-m", "mcp_server.faces.cli"]
        if trace is not None:
            start = [sys.executable, str(HERE / "installtrace.py"), str(trace)]
        argv = [*start, "install", "--branch", "main", "--python", str(venv), "--create-env"]
        argv += ["--repository", scenario.url, "--subdirectory", DEFAULT_SUBDIRECTORY]
        argv += ["--distribution", REFERENCE_DISTRIBUTION]
        return self._timed([argv], venv, warm_up=warm_up, cwd=tree)

    def raw_uv(
        self, scenario: Scenario, *, warm_up: bool = False, compiled: bool = False
    ) -> tuple[float, float]:
        venv = self._venv()
        requirement = (
            f"{REFERENCE_DISTRIBUTION} @ git+{scenario.url}@{scenario.commit}"
            f"#subdirectory={DEFAULT_SUBDIRECTORY}"
        )
        interpreter = str(venv / "bin" / "python")
        commands = [
            [self.uv, "venv", "--quiet", "--python", sys.executable, "--", str(venv)],
            [self.uv, "pip", "install", "--no-progress", "--python", interpreter, requirement],
        ]
        if compiled:
            commands[1].insert(3, "--compile-bytecode")
        span = self._timed(commands, venv, warm_up=warm_up)
        self.check_git_cache_used()
        return span

    def sides(self, scenario: Scenario) -> dict[str, Callable[..., tuple[float, float]]]:
        sides: dict[str, Callable[..., tuple[float, float]]] = {SETUP: self.automl_setup}
        if self.baseline is not None:
            tree = self.baseline

            def baseline(scenario: Scenario, **kw: object) -> tuple[float, float]:
                return self.automl_setup(scenario, tree=tree, **kw)  # type: ignore[arg-type]

            sides[BASELINE] = baseline
        sides[RAW] = self.raw_uv
        if scenario.cold_limit is not None:

            def cold(scenario: Scenario, **kw: object) -> tuple[float, float]:
                return self.automl_setup(scenario, cold=True, **kw)  # type: ignore[arg-type]

            def compiled(scenario: Scenario, **kw: object) -> tuple[float, float]:
                return self.raw_uv(scenario, compiled=True, **kw)  # type: ignore[arg-type]

            sides[SETUP_COLD], sides[RAW_COMPILED] = cold, compiled
        return sides

    def measure(self, scenario: Scenario, runs: int, traced: int) -> Result:
        sides = self.sides(scenario)
        for side in sides.values():
            self.reset()
            side(scenario, warm_up=True)
        times: dict[str, list[float]] = {name: [] for name in sides}
        names = list(sides)
        for index in range(runs):
            order = names[index % len(names) :] + names[: index % len(names)]  # each leads
            for name in order:
                self.reset()
                start, end = sides[name](scenario)
                times[name].append(end - start)
            shown = ", ".join(f"{name} {times[name][-1]:.2f} s" for name in sides)
            print(f"  {scenario.key} run {index + 1}/{runs}: {shown}", flush=True)
        where = {
            name: self._where(scenario, name, traced) for name in (SETUP, BASELINE) if name in sides
        }
        self.raw_uv(scenario)  # leaves the commit fetched and built in uv's cache
        cached = [end - start for start, end in (self.raw_uv(scenario) for _ in range(runs))]
        medians = {name: statistics.median(values) for name, values in times.items()}
        return Result(scenario, medians, statistics.median(cached), where)

    def _where(self, scenario: Scenario, side: str, traced: int) -> str:
        """Untimed runs of an automl-setup side with every child process timed."""
        tree = self.baseline if side == BASELINE and self.baseline is not None else TREE
        found: list[Shares] = []
        with tempfile.TemporaryDirectory() as folder:
            for index in range(traced):
                trace = Path(folder) / f"trace-{index}.json"
                self.reset()
                start, end = self.automl_setup(scenario, tree=tree, trace=trace)
                found.append(shares(trace, start, end))
        return summary(found) if found else ""
