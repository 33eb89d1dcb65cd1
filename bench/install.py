"""Benchmark: `automl-setup install` against a raw `uv pip install` from git.

Prints figures; it is not a test. Three scenarios, each on a local file:// repository served
like the big hosts (uploadpack.allowFilter and uploadpack.allowAnySHA1InWant set), described
in bench/installrepos.py: a, the small repository; b, a monorepo with --blob-mb of history;
c, the engine with heavy dependencies from the index (numpy, scipy, scikit-learn, pandas).

Both sides start from the same state before every timed run (see fairness_notes), and both
timings include creating the target venv (`uv venv` with this interpreter): automl-setup
creates it itself (--create-env), raw uv runs `uv venv` first.

After the timed runs, --trace-runs untimed runs of automl-setup time every child process
(bench/installtrace.py) and print where the time goes: uv's share and automl-setup's own.
--baseline TREE adds a third side, the automl-setup of another checkout (old figures beside
the new ones, measured in the same alternating loop).

Run: .venv/bin/python bench/install.py [--runs N] [--only a|b|c] [--baseline TREE] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.installrepos import (
    BLOB_FOLDERS,
    DELETED_FOLDERS,
    HEAVY,
    BenchError,
    disk_mb,
    heavy_repository,
    monorepo,
    run,
    small_repository,
)
from bench.installsides import (
    BASELINE,
    RAW,
    RAW_COMPILED,
    SETUP,
    SETUP_COLD,
    Bench,
    Result,
    Scenario,
)
from mcp_server.children.uv import uv_version
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION

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
        "build-backend caches (hatchling, pydantic, numpy, ...), which stay warm for every "
        "timed run; each side installs from that cache as it does by default (automl-setup "
        "links the dependencies and copies the engine's own files)",
        f"before every run of either side uv's git cache (git-v*) and its builds of {dist} "
        f"(`uv cache clean {dist}`) are removed: otherwise raw uv re-installs a commit it "
        "fetched and built before, while automl-setup always fetches and builds (it records "
        "a reproducible wheel and verifies it); so raw uv fetches and builds the commit too",
        network,
        f"runs alternate between the sides (each leads in turn); figures are medians of "
        f"{runs} runs",
    ]


# --------------------------------------------------------------------------------------------
# Output


def print_table(results: list[Result], *, baseline: bool) -> None:
    header = ["scenario", "automl-setup s", "raw uv s", "ratio", "target", "result"]
    if baseline:
        header[1:1] = ["baseline s", "baseline ratio"]
    rows = []
    for r in results:
        row = [
            f"{r.scenario.key}  {r.scenario.title}",
            f"{r.medians[SETUP]:.2f}",
            f"{r.medians[RAW]:.2f}",
            f"{r.ratio():.2f}x",
            r.scenario.target,
            "pass" if r.scenario.passes(r.ratio()) else "FAIL",
        ]
        if baseline:
            row[1:1] = [f"{r.medians[BASELINE]:.2f}", f"{r.ratio(BASELINE):.2f}x"]
        rows.append(row)
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
        for side, where in r.where.items():
            print(wrap(f"where {r.scenario.key}'s {side} time goes (traced runs): {where}"))
    print_bytecode_table([r for r in results if SETUP_COLD in r.medians])
    sizes = {r.scenario.key: r.medians[SETUP] for r in results}
    if {"a", "b"} <= sizes.keys():  # the monorepo must cost about what the small one does
        ratio = sizes["b"] / sizes["a"]
        verdict = "pass" if ratio <= B_OVER_A else "FAIL"
        print(f"b / a, automl-setup's own times: {ratio:.2f}x (target <= {B_OVER_A}x): {verdict}")


def print_bytecode_table(results: list[Result]) -> None:
    """Issue 45's table: warm bytecode cache against raw uv (which leaves no bytecode), empty
    cache against uv compiling the whole environment."""
    if not results:
        return
    print(
        f"\n| | {SETUP} | {RAW} | {SETUP_COLD} | {RAW_COMPILED} |\n| --- | --- | --- | --- | --- |"
    )
    for r in results:
        warm, cold = r.ratio(), r.ratio(SETUP_COLD, RAW_COMPILED)
        limit = r.scenario.cold_limit or 0.0
        print(
            f"| {r.scenario.key} {r.scenario.title} | {r.medians[SETUP]:.2f} s | "
            f"{r.medians[RAW]:.2f} s (warm cache: **{warm:.2f}×**, target {r.scenario.target}: "
            f"{'pass' if r.scenario.passes(warm) else 'FAIL'}) | {r.medians[SETUP_COLD]:.2f} s | "
            f"{r.medians[RAW_COMPILED]:.2f} s (empty cache: **{cold:.2f}×**, target <= "
            f"{limit:.2f}x: {'pass' if cold <= limit else 'FAIL'}) |"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time `automl-setup install` against raw `uv pip install` from git.",
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per side (median)")
    parser.add_argument(
        "--trace-runs",
        type=int,
        default=3,
        help="untimed runs of automl-setup with every child timed: where the time goes",
    )
    parser.add_argument(
        "--blob-mb", type=int, default=300, help="MB of random blobs in the monorepo history"
    )
    parser.add_argument("--only", choices=("a", "b", "c"), help="run one scenario only")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another automl-setup checkout (e.g. `git archive` of an older commit) timed as "
        "a third side in the same loop",
    )
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
    if args.runs < 1 or args.blob_mb < 1 or args.trace_runs < 0:
        parser.error("--runs and --blob-mb must be at least 1, --trace-runs at least 0")
    if args.baseline is not None and not (args.baseline / "mcp_server").is_dir():
        parser.error(f"--baseline {args.baseline}: no mcp_server folder there")
    return args


def scenarios(args: argparse.Namespace, workdir: Path) -> list[Scenario]:
    found: list[Scenario] = []
    if args.only in (None, "a"):
        url, commit = small_repository(workdir / "small")
        found.append(Scenario("a", "small repository", url, commit, 1.3, True, 1.0))
    if args.only in (None, "b"):
        url, commit, bare = monorepo(workdir / "cache", args.blob_mb)
        print(
            f"monorepo: {args.blob_mb} MB of blobs in history "
            f"({args.blob_mb * len(DELETED_FOLDERS) // len(BLOB_FOLDERS)} MB deleted "
            f"before HEAD), served repository {disk_mb(bare):.0f} MB on disk"
        )
        title = f"monorepo, {args.blob_mb} MB history"
        found.append(Scenario("b", title, url, commit, 0.05, True))
    if args.only in (None, "c"):
        url, commit = heavy_repository(workdir / "heavy")
        title = f"heavy deps ({', '.join(HEAVY)})"
        found.append(Scenario("c", title, url, commit, 1.15, True, 0.5))
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir: Path = args.workdir or Path(tempfile.mkdtemp(prefix="automl-setup-bench-"))
    workdir = workdir.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    cache_dir: Path = (args.cache_dir or workdir / "uv-cache").absolute()
    baseline = args.baseline.absolute() if args.baseline else None
    bench = Bench(workdir, cache_dir, offline=not args.online, baseline=baseline)
    print(f"{uv_version()}, {run(['git', '--version'])}, Python {sys.version.split()[0]}")
    print(f"workdir {workdir}; {load_average()} at the start")
    if baseline is not None:
        print(f"baseline: the automl-setup of {baseline}")
    print("fairness:")
    for note in fairness_notes(cache_dir, args.runs, online=args.online):
        print(wrap(note, "  - ", "    "))
    try:
        results = [bench.measure(s, args.runs, args.trace_runs) for s in scenarios(args, workdir)]
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            shutil.rmtree(workdir / "envs", ignore_errors=True)
    print(f"\n{load_average()} at the end (other work on the machine widens the spread)")
    print_table(results, baseline=baseline is not None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
