"""Benchmark: `automl-setup install` against a raw `uv pip install` from git.

Prints figures; it is not a test. Two scenarios, each on a local file:// repository served
like the big hosts (uploadpack.allowFilter and uploadpack.allowAnySHA1InWant set):

  a  the small reference-engine repository (the engine on `main`, nothing else);
  b  a generated monorepo whose history carries --blob-mb of incompressible blobs outside
     the engine's subdirectory (some deleted again, so they live only in history), with the
     engine committed on top. Built once into <workdir>/cache/ and reused on reruns.

Both sides start from the same state before every timed run (see fairness_notes), and both
timings include creating the target venv (`uv venv` with this interpreter): automl-setup
creates it itself (--create-env), raw uv runs `uv venv` first.

Run: .venv/bin/python bench/install.py [--runs N] [--only a|b] [--blob-mb MB] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcp_server.source.sourcerepo import (
    DEFAULT_SUBDIRECTORY,
    REFERENCE_DISTRIBUTION,
    SourceRepository,
)
from mcp_server.source.wheelbuild import uv_binary, uv_version

MIB = 1 << 20
FILE_MB = 8  # size of each random blob file
BLOB_FOLDERS = ("datasets", "checkpoints", "media", "vendor", "third_party", "assets")
DELETED_FOLDERS = BLOB_FOLDERS[:3]  # removed again before the engine commit: history only
MONOREPO_FORMAT = 1  # bump when the generated layout changes, so old caches are not reused
SERVED_CONFIG = {"uploadpack.allowFilter": "true", "uploadpack.allowAnySHA1InWant": "true"}
B_OVER_A = 1.2  # target: the monorepo install within 1.2x of the small one's absolute time


def wrap(text: str, first: str = "", rest: str = "  ") -> str:
    """Wrapped for a terminal, without splitting paths or commands at hyphens."""
    return textwrap.fill(
        text,
        width=100,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def load_average() -> str:
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"


def fairness_notes(cache_dir: Path, runs: int, *, online: bool) -> list[str]:
    dist = REFERENCE_DISTRIBUTION
    network = (
        "timed runs are online: uv revalidates whatever index pages it considers stale"
        if online
        else "timed runs set UV_OFFLINE=1 for both sides (warm-ups run online): a cache warmed "
        "seconds before is fresh on PyPI (max-age=600) and uv sends no request, but an index "
        "mirror without cache headers makes uv revalidate every page on every run, which "
        "would time the network, not the tools (--online measures that instead)"
    )
    return [
        "both sides: a fresh venv per run, created inside the timed region (automl-setup by "
        "--create-env, raw uv by `uv venv`), same interpreter, same uv binary, same uv cache "
        f"(UV_CACHE_DIR={cache_dir}), VIRTUAL_ENV unset",
        "one untimed warm-up of each side per scenario fills uv's index, wheel and "
        "build-backend caches (hatchling, pydantic, ...), which stay warm for every timed run",
        f"before every run of either side uv's git cache (git-v*) and its builds of {dist} "
        f"(`uv cache clean {dist}`) are removed: otherwise raw uv re-installs a commit it "
        "fetched and built before, while automl-setup always fetches and builds (it records "
        "a reproducible wheel and verifies it); so raw uv fetches and builds the commit too",
        network,
        f"runs alternate between the two sides; figures are medians of {runs} runs",
    ]


class BenchError(RuntimeError):
    """A command the benchmark relies on failed; the message carries its output."""


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    url: str
    commit: str
    limit: float  # the target ratio automl-setup / raw uv
    inclusive: bool  # True: ratio <= limit passes; False: ratio < limit passes

    @property
    def target(self) -> str:
        return f"{'<=' if self.inclusive else '<'} {self.limit:.2f}x"

    def passes(self, ratio: float) -> bool:
        return ratio <= self.limit if self.inclusive else ratio < self.limit


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    automl_setup: float
    raw_uv: float
    raw_uv_cached: float  # raw uv when the commit is already fetched and built in its cache

    @property
    def ratio(self) -> float:
        return self.automl_setup / self.raw_uv


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc.stdout.strip()


def git(*args: str, cwd: Path) -> str:
    return run(["git", *args], cwd=cwd)


def disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / MIB


# --------------------------------------------------------------------------------------------
# Repositories


def small_repository(root: Path) -> tuple[str, str]:
    """(url, commit) of a fresh reference-engine repository with the engine on main."""
    shutil.rmtree(root, ignore_errors=True)
    repo = SourceRepository(root)
    return repo.url, repo.commit_engine("main", marker="bench")


def monorepo(cache: Path, blob_mb: int) -> tuple[str, str, Path]:
    """(url, commit, bare repository) of the generated monorepo, built once per size."""
    root = cache / f"monorepo-{blob_mb}mb-v{MONOREPO_FORMAT}"
    bare = root / "origin.git"
    ready = root / "READY"
    if not ready.exists():
        print(f"building the {blob_mb} MB monorepo in {root} (once; reused on reruns) ...")
        started = time.perf_counter()
        shutil.rmtree(root, ignore_errors=True)
        _generate_monorepo(root, blob_mb)
        ready.write_text("complete\n", encoding="utf-8")
        print(f"  built in {time.perf_counter() - started:.1f} s")
    for key, value in SERVED_CONFIG.items():
        if git("config", "--get", key, cwd=bare) != value:
            raise BenchError(f"{bare}: {key} is not {value}")
    return bare.resolve().as_uri(), git("rev-parse", "refs/heads/main", cwd=bare), bare


def _generate_monorepo(root: Path, blob_mb: int) -> None:
    repo = SourceRepository(root)
    # Pushed packs are kept as packs on the served side (as a host stores them), and random
    # blobs are neither compressed nor delta-searched while building (they would not shrink).
    git("config", "receive.unpackLimit", "1", cwd=repo.bare)
    for key, value in (("core.compression", "0"), ("core.bigFileThreshold", "1m")):
        git("config", key, value, cwd=repo.work)
    total = blob_mb * MIB
    share, rest = divmod(total, len(BLOB_FOLDERS))
    for index, folder in enumerate(BLOB_FOLDERS):
        remaining = share + (rest if index == len(BLOB_FOLDERS) - 1 else 0)
        part = 0
        while remaining > 0:
            size = min(FILE_MB * MIB, remaining)
            path = repo.work / folder / f"blob-{part:03d}.bin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(os.urandom(size))
            remaining -= size
            part += 1
        git("add", "--", folder, cwd=repo.work)
        git("commit", "-q", "-m", f"add {folder}", cwd=repo.work)
    git("rm", "-r", "-q", "--", *DELETED_FOLDERS, cwd=repo.work)
    git("commit", "-q", "-m", f"remove {', '.join(DELETED_FOLDERS)}", cwd=repo.work)
    git("push", "-q", "origin", "refs/heads/main:refs/heads/main", cwd=repo.work)
    repo.commit_engine("main", marker="monorepo")
    shutil.rmtree(repo.work)  # only the served bare repository is needed


# --------------------------------------------------------------------------------------------
# The two sides


class Bench:
    def __init__(self, workdir: Path, cache_dir: Path, *, offline: bool) -> None:
        self.envs = workdir / "envs"
        self.cache_dir = cache_dir
        self.offline = offline
        self.uv = uv_binary()
        self.count = 0

    def environment(self, *, warm_up: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_OFFLINE")}
        env["UV_CACHE_DIR"] = str(self.cache_dir)
        if self.offline and not warm_up:
            env["UV_OFFLINE"] = "1"
        return env

    def reset(self) -> None:
        """Untimed, before every run of either side: uv must fetch and build the commit, and
        no write-back left by the previous run (hundreds of MB in b) lands in the next one."""
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

    def _timed(self, commands: list[list[str]], venv: Path, *, warm_up: bool) -> float:
        env = self.environment(warm_up=warm_up)
        started = time.perf_counter()
        for argv in commands:
            run(argv, env=env)
        elapsed = time.perf_counter() - started
        shutil.rmtree(venv)
        return elapsed

    def automl_setup(self, scenario: Scenario, *, warm_up: bool = False) -> float:
        venv = self._venv()
        argv = [sys.executable, "-m", "mcp_server.faces.cli", "install", "--branch", "main"]
        argv += ["--python", str(venv), "--create-env", "--repository", scenario.url]
        argv += ["--subdirectory", DEFAULT_SUBDIRECTORY, "--distribution", REFERENCE_DISTRIBUTION]
        return self._timed([argv], venv, warm_up=warm_up)

    def raw_uv(self, scenario: Scenario, *, warm_up: bool = False) -> float:
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
        elapsed = self._timed(commands, venv, warm_up=warm_up)
        self.check_git_cache_used()
        return elapsed

    def measure(self, scenario: Scenario, runs: int) -> Result:
        sides: dict[str, Callable[..., float]] = {
            "automl-setup": self.automl_setup,
            "raw uv": self.raw_uv,
        }
        for side in sides.values():
            self.reset()
            side(scenario, warm_up=True)
        times: dict[str, list[float]] = {name: [] for name in sides}
        for index in range(runs):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            for name in order:
                self.reset()
                times[name].append(sides[name](scenario))
            shown = ", ".join(f"{name} {times[name][-1]:.2f} s" for name in sides)
            print(f"  {scenario.key} run {index + 1}/{runs}: {shown}", flush=True)
        self.raw_uv(scenario)  # leaves the commit fetched and built in uv's cache
        cached = [self.raw_uv(scenario) for _ in range(runs)]
        return Result(
            scenario,
            statistics.median(times["automl-setup"]),
            statistics.median(times["raw uv"]),
            statistics.median(cached),
        )


# --------------------------------------------------------------------------------------------
# Output


def print_table(results: list[Result]) -> None:
    header = ("scenario", "automl-setup s", "raw uv s", "ratio", "target", "result")
    rows = [
        (
            f"{r.scenario.key}  {r.scenario.title}",
            f"{r.automl_setup:.2f}",
            f"{r.raw_uv:.2f}",
            f"{r.ratio:.2f}x",
            r.scenario.target,
            "pass" if r.scenario.passes(r.ratio) else "FAIL",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        print("  ".join(cells))
    for r in results:
        note = (
            f"note {r.scenario.key}: raw uv re-installing a commit it already fetched and built "
            f"(its git cache warm) takes {r.raw_uv_cached:.2f} s; not the comparison above"
        )
        print(wrap(note))
    sizes = {r.scenario.key: r.automl_setup for r in results}
    if {"a", "b"} <= sizes.keys():  # the monorepo must cost about what the small one does
        ratio = sizes["b"] / sizes["a"]
        verdict = "pass" if ratio <= B_OVER_A else "FAIL"
        print(f"b / a, automl-setup's own times: {ratio:.2f}x (target <= {B_OVER_A}x): {verdict}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time `automl-setup install` against raw `uv pip install` from git.",
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per side (median)")
    parser.add_argument(
        "--blob-mb", type=int, default=300, help="MB of random blobs in the monorepo history"
    )
    parser.add_argument("--only", choices=("a", "b"), help="run one scenario only")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="folder for repositories, venvs and the monorepo cache (default: a temp dir, "
        "removed at the end unless --keep; a given --workdir is kept)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary workdir")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="uv cache for both sides (default <workdir>/uv-cache); its git entries are "
        "deleted before every run, so do not point it at a cache others are using",
    )
    parser.add_argument(
        "--online",
        action="store_true",
        help="let uv revalidate its index cache during timed runs (default: UV_OFFLINE=1)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.blob_mb < 1:
        parser.error("--runs and --blob-mb must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir: Path = args.workdir or Path(tempfile.mkdtemp(prefix="automl-setup-bench-"))
    workdir = workdir.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    cache_dir: Path = (args.cache_dir or workdir / "uv-cache").absolute()
    bench = Bench(workdir, cache_dir, offline=not args.online)
    print(f"{uv_version()}, {run(['git', '--version'])}, Python {sys.version.split()[0]}")
    print(f"workdir {workdir}; {load_average()} at the start")
    print("fairness:")
    for note in fairness_notes(cache_dir, args.runs, online=args.online):
        print(wrap(note, "  - ", "    "))
    scenarios: list[Scenario] = []
    try:
        if args.only in (None, "a"):
            url, commit = small_repository(workdir / "small")
            scenarios.append(Scenario("a", "small repository", url, commit, 1.3, True))
        if args.only in (None, "b"):
            url, commit, bare = monorepo(workdir / "cache", args.blob_mb)
            print(
                f"monorepo: {args.blob_mb} MB of blobs in history "
                f"({args.blob_mb * len(DELETED_FOLDERS) // len(BLOB_FOLDERS)} MB deleted "
                f"before HEAD), served repository {disk_mb(bare):.0f} MB on disk"
            )
            title = f"monorepo, {args.blob_mb} MB history"
            scenarios.append(Scenario("b", title, url, commit, 0.05, True))
        results = [bench.measure(scenario, args.runs) for scenario in scenarios]
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            shutil.rmtree(workdir / "envs", ignore_errors=True)
    print(f"\n{load_average()} at the end (other work on the machine widens the spread)")
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
