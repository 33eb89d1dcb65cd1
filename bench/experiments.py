"""Benchmark: experiments bound to an engine build. Prints figures; it is not a test.

1  Launch overhead: `automl-setup launch` (foreground) against starting the installed engine's
   own `run` directly, same tiny manifest (one trial, no sleep), fresh workspace per run, both
   as processes; the ratio of the medians and the absolute difference.
2  Resume check: the time automl-setup spends deciding to accept a resume (controller lock,
   binding read, manifest hash, locate, record read, verify, identity compare, register,
   attempts ledger read + append), step by step, on interrupted experiments whose
   attempts ledger, engine ledger, or both hold --entries lines (100,000 by default),
   against small ones. Target: < 0.3 s. The entries are generated in each ledger's own
   format: the engine's with the installed engine's own modules (its search, workload and
   state models), the attempts with automl-setup's AttemptEntry.
3  Engine replay (context): the installed engine's `status` on ledgers of a few sizes. The
   engine replays its whole ledger for status and (twice) for resume; this shows how that
   scales, which bounds the engine's side of a resume and automl-setup's `status`.
4  Many experiments (with --experiments N): `list` (cold: no status snapshot yet; and again)
   and `status` of one through the command line, and MCP `list_experiments` walked page by
   page in process, in workspaces of 10, 100, ... and N experiments (bench/experimentscale.py
   makes them cheaply, in the real formats). --before DIR runs the command line of another
   tree too (an unpacked `git archive` of an older commit) on the same workspaces: old and
   new figures side by side, and whether they list the same answers.

Run: .venv/bin/python bench/experiments.py [--runs N] [--entries N] [--engine-sizes A,B,C]
                                            [--experiments N [--before DIR]] [--only 1,2,3,4]
                                            [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from bench.experimentscale import clone_experiments, measure_scale, report
from mcp_server import operations
from mcp_server.children.uv import uv_version
from mcp_server.environment.identity import environment_info
from mcp_server.environment.records import RecordStore, utc_now
from mcp_server.environment.target import locate
from mcp_server.environment.verify import verify_environment
from mcp_server.experiments.attempts import AttemptEntry, log_attempt
from mcp_server.experiments.binding import identity_differences, read_binding
from mcp_server.experiments.engine import engine_script
from mcp_server.experiments.files import ExperimentFiles, controller_lock, lock_is_held
from mcp_server.experiments.launch import launch_experiment
from mcp_server.experiments.manifest import read_manifest
from mcp_server.experiments.registered import register_experiment
from mcp_server.experiments.resume import resume_experiment
from mcp_server.fsutil import exclusive_lock, read_json_lines
from mcp_server.requests import InstallRequest, LaunchRequest, ResumeRequest
from mcp_server.source.profile import EngineProfile
from mcp_server.source.sourcerepo import (
    DEFAULT_SUBDIRECTORY,
    REFERENCE_DISTRIBUTION,
    SourceRepository,
    quadratic_manifest,
)
from mcp_server.values import ManifestPath

ENGINE_CLI = "automl-refengine"
TARGET_S = 0.3
LAUNCH_RATIO = 1.3  # launch at most this many times the engine's own `run`
WAIT_S = 120.0

# Runs inside the engine's environment: writes a ledger of N events in the engine's own
# format (the real first event, then finished trials with the engine's own params and the
# workload's own loss, then a SIGTERM session end), and the state.json that replays from it.
# The state is built directly, because the engine's replay is quadratic (see section 3); for
# small ledgers it is checked against the engine's replay.
GENERATE = r"""
import json, sys
from pathlib import Path
from automl_refengine.durable import atomic_write_json
from automl_refengine.layout import ExperimentPaths, read_recorded_manifest
from automl_refengine.ledger import read_events
from automl_refengine.manifest import expand_argv
from automl_refengine.search import trial_params
from automl_refengine.state import Best, ExperimentState, TrialRecord, replay
from automl_refengine.workloads.quadratic import loss

workspace, experiment_id, entries = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
paths = ExperimentPaths(workspace, experiment_id)
manifest = read_recorded_manifest(paths)
search = manifest.search
assert search.objective.direction == "minimize" and search.objective.metric == "loss"
real = [json.loads(line) for line in paths.ledger.read_bytes().splitlines()]
first = real[0]
pgid = next(e["pgid"] for e in real if e["event"] == "trial_started")
stamp = first["time"]
trials = (entries - 2) // 2
assert trials < search.budget.max_trials, "the manifest must leave trials to resume"
lines, records, best = [], [], None

def emit(event):
    event["seq"] = len(lines) + 1
    event.setdefault("time", stamp)
    event.setdefault("session", 1)
    event.setdefault("session_elapsed_s", round(1e-4 * len(lines), 6))
    lines.append(json.dumps(event, sort_keys=True, separators=(",", ":")))

emit(dict(first))
for i in range(trials):
    params = trial_params(search, i)
    where = paths.trial_dir(i)
    argv = expand_argv(manifest.workload.argv, where, where / "params.json")
    emit({"event": "trial_started", "index": i, "attempt": 1, "params": params,
          "argv": argv, "pgid": pgid})
    value = loss(params)
    emit({"event": "trial_finished", "index": i, "attempt": 1, "status": "succeeded",
          "reason": "ok", "value": value, "metrics": {"loss": value}, "returncode": 0,
          "duration_s": 0.001, "detail": ""})
    records.append(TrialRecord(index=i, attempts=1, params=params, status="succeeded",
                               pgid=pgid, value=value, reason="ok"))
    if best is None or value < best.value:
        best = Best(index=i, params=params, value=value, metric="loss", direction="minimize")
emit({"event": "session_ended", "reason": "signal", "signal": "SIGTERM"})
last = json.loads(lines[-1])
state = ExperimentState(
    experiment_id=experiment_id, manifest_sha256=first["manifest_sha256"],
    state="interrupted", stop_reason="signal SIGTERM", ledger_events=len(lines), sessions=1,
    session_open=False, elapsed_before_session_s=0.0, elapsed_s=last["session_elapsed_s"],
    trials=records, best=best, updated_at=last["time"],
)
paths.ledger.write_bytes(("\n".join(lines) + "\n").encode())
if len(lines) <= 600:
    events = read_events(paths.ledger)
    assert replay(events, experiment_id, search.objective) == state, "state differs from replay"
atomic_write_json(paths.state, state.model_dump(mode="json"))
atomic_write_json(paths.best, best.model_dump(mode="json"))
print(json.dumps({"events": len(lines), "bytes": paths.ledger.stat().st_size}))
"""


def wrap(text: str, first: str = "", rest: str = "  ") -> str:
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


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def write_manifest(path: Path, experiment_id: str, *, max_trials: int, sleep: float) -> Path:
    data = quadratic_manifest(
        experiment_id, seed=7, max_trials=max_trials, sleep=sleep, total_timeout_s=1_000_000.0
    )
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def automl_setup_argv() -> list[str]:
    script = Path(sys.executable).parent / "automl-setup"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcp_server.faces.cli"]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}


def timed_run(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env or clean_env(),
        check=False,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {proc.stderr[-500:]}")
    return elapsed


# --------------------------------------------------------------------------------------------
# 1. Launch overhead


def launch_overhead(workdir: Path, env: Path, runs: int, before: Path | None = None) -> None:
    print("\n1. launch overhead: `automl-setup launch` vs the engine's `run`, foreground")
    manifest = write_manifest(workdir / "tiny.yaml", "tiny", max_trials=1, sleep=0.0)
    engine = str(env / "bin" / ENGINE_CLI)
    clis = {"launch": (automl_setup_argv(), clean_env())}
    if before is not None:  # the older tree's command line, in the same rounds
        old = [sys.executable, "-P", "-m", "mcp_server.faces.cli"]  # -P: no cwd on sys.path
        clis["launch (before)"] = (old, {**clean_env(), "PYTHONPATH": str(before)})
    times: dict[str, list[float]] = {"direct": [], **{name: [] for name in clis}}
    for index in range(runs + 1):  # round 0 warms the page cache and is not counted
        run_direct = [engine, "run", "--manifest", str(manifest), "--approve"]
        run_direct += ["--workspace", str(workdir / "direct" / str(index))]
        calls = {"direct": (run_direct, clean_env())}
        for name, (cli, variables) in clis.items():
            argv = [*cli, "launch", "--manifest", str(manifest), "--python", str(env)]
            argv += ["--workspace", str(workdir / name.replace(" ", "-") / str(index))]
            calls[name] = (argv, variables)
        order = list(calls) if index % 2 else list(reversed(calls))  # alternating
        for name in order:
            elapsed = timed_run(*calls[name])
            if index:
                times[name].append(elapsed)
    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"   manifest: 1 trial, --sleep 0; {runs} runs each, alternating order, after 1 warm-up")
    fastest = ms(min(times["direct"]))
    print(f"   engine `run` directly:  median {ms(med['direct'])} ms (min {fastest})")
    for name in clis:
        ratio = med[name] / med["direct"]
        print(
            f"   automl-setup {name + ':':<17} median {ms(med[name])} ms (min "
            f"{ms(min(times[name]))}); {ratio:.2f}x (target <= {LAUNCH_RATIO}x: "
            f"{'met' if ratio <= LAUNCH_RATIO else 'MISSED'}); overhead "
            f"{ms(med[name] - med['direct'])} ms"
        )
    print(
        "   (the overhead: interpreter start and imports, locate, verify every installed file, "
        "the probe, the engine's plan, binding, registry, ledger)"
    )


# --------------------------------------------------------------------------------------------
# 2. Resume check


@contextlib.contextmanager
def step(times: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    times[name] = times.get(name, 0.0) + time.perf_counter() - started


def decision(files: ExperimentFiles, manifest: Path, env_path: Path) -> dict[str, float]:
    """The steps resume_experiment takes before it starts the engine, timed one by one, with
    the same functions. The attempt is logged as a refusal, so no engine is started."""
    t: dict[str, float] = {}
    locking = time.perf_counter()
    with controller_lock(files):
        t["controller lock"] = time.perf_counter() - locking
        with step(t, "read binding"):
            binding = read_binding(files)
        with step(t, "read manifest + sha256"):
            _path, data, _id = read_manifest(ManifestPath(str(manifest)))
            assert hashlib.sha256(data).hexdigest() == binding.manifest_sha256
        with step(t, "locate environment"):
            env = locate(str(env_path))
        store = RecordStore(env.state_dir)
        with exclusive_lock(store.lock_path, step="bench", holder="bench"):
            with step(t, "read install record"):
                record = store.read_record()
                assert record is not None
            with step(t, "probe the environment (once)"):
                probe = env.probe([record.build.distribution])
            with step(t, "verify (direct_url, RECORD hashes)"):
                report = verify_environment(env, record.build.distribution, probe=probe)
                assert report.status == "verified", report
            with step(t, "identity compare (diff)"):
                now = environment_info(probe, list(binding.engine.environment.dependencies))
                assert not identity_differences(binding, record, now)
            with step(t, "engine console script"):
                engine_script(probe, record)
            with step(t, "register with the environment"):
                register_experiment(
                    env.state_dir,
                    files.experiment_id,
                    files.workspace,
                    binding.engine.identity_digest,
                )
            with step(t, "attempts: log (tail read + append)"):
                log_attempt(files, action="resume", outcome="refused", reason="bench timing")
    return t


def wait_engine_gone(files: ExperimentFiles, pid: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while lock_is_held(files):
        if time.monotonic() > deadline:
            raise RuntimeError(f"engine {pid} still holds the lock after {WAIT_S} s")
        time.sleep(0.02)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def interrupted_experiment(
    workdir: Path, env: Path, name: str, max_trials: int
) -> tuple[ExperimentFiles, Path]:
    """Launched for real through automl-setup, SIGTERMed after its first trial."""
    manifest = write_manifest(workdir / f"{name}.yaml", name, max_trials=max_trials, sleep=0.05)
    workspace = workdir / f"ws-{name}"
    started = launch_experiment(
        LaunchRequest(
            manifest=str(manifest), workspace=str(workspace), python=str(env), detach=True
        )
    )
    files = ExperimentFiles(workspace.resolve(), name)
    state = files.engine_dir / "state.json"

    def finished() -> int:
        try:
            trials = json.loads(state.read_bytes())["trials"]
        except (OSError, ValueError):
            return 0
        return sum(t["status"] == "succeeded" for t in trials)

    deadline = time.monotonic() + WAIT_S
    while finished() < 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: no trial finished")
        time.sleep(0.02)
    os.kill(started.pid, signal.SIGTERM)
    wait_engine_gone(files, started.pid)
    return files, manifest


def generate_engine_ledger(env: Path, files: ExperimentFiles, entries: int) -> dict[str, int]:
    proc = subprocess.run(
        [
            str(env / "bin" / "python"),
            "-c",
            GENERATE,
            str(files.workspace),
            files.experiment_id,
            str(entries),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"generating the engine ledger failed: {proc.stderr[-800:]}")
    return dict(json.loads(proc.stdout))


def pad_attempts(files: ExperimentFiles, entries: int) -> None:
    """Earlier refusals, in AttemptEntry's own format, up to `entries` lines."""
    have = len(read_json_lines(files.attempts, what="attempts ledger").entries)
    template = AttemptEntry(
        time=utc_now(),
        action="resume",
        outcome="refused",
        attempt=1,
        host=socket.gethostname(),
        reason=f"lock: another controller holds the lock of experiment {files.experiment_id}",
    ).model_dump(mode="json")
    with files.attempts.open("a", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps({**template, "attempt": n}, sort_keys=True, separators=(",", ":")) + "\n"
            for n in range(have + 1, entries + 1)
        )


def measure(files: ExperimentFiles, manifest: Path, env: Path, runs: int) -> dict[str, float]:
    samples = [decision(files, manifest, env) for _ in range(runs)]
    medians = {name: statistics.median(s[name] for s in samples) for name in samples[0]}
    medians["total (median of sums)"] = statistics.median(sum(s.values()) for s in samples)
    return medians


def end_to_end(files: ExperimentFiles, manifest: Path, env: Path, *, kill: bool) -> float:
    """resume_experiment itself, detached: returns once the engine is started and logged."""
    started = time.perf_counter()
    result = resume_experiment(
        ResumeRequest(
            experiment_id=files.experiment_id,
            workspace=str(files.workspace),
            manifest=str(manifest),
            python=str(env),
            detach=True,
        )
    )
    elapsed = time.perf_counter() - started
    if kill:  # its engine would replay a huge ledger for a long time: not what is measured
        with contextlib.suppress(ProcessLookupError):
            os.killpg(result.pid, signal.SIGKILL)
    wait_engine_gone(files, result.pid)
    return elapsed


def ledger_sizes(files: ExperimentFiles) -> str:
    attempts = len(files.attempts.read_bytes().splitlines())
    events = len((files.engine_dir / "ledger.jsonl").read_bytes().splitlines())
    return f"{attempts:,} attempts / {events:,} engine events"


def resume_check(workdir: Path, env: Path, runs: int, entries: int) -> None:
    print(f"\n2. resume check: automl-setup deciding to accept a resume (target < {TARGET_S} s)")
    columns: dict[str, dict[str, float]] = {}
    sizes: dict[str, str] = {}
    e2e: dict[str, float] = {}

    small, small_manifest = interrupted_experiment(workdir, env, "small", max_trials=3)
    sizes["small"] = ledger_sizes(small)
    columns["small"] = measure(small, small_manifest, env, runs)
    pad_attempts(small, entries)
    sizes["attempts"] = ledger_sizes(small)
    columns["attempts"] = measure(small, small_manifest, env, runs)
    e2e["attempts"] = end_to_end(small, small_manifest, env, kill=False)

    trials = (entries - 2) // 2
    big, big_manifest = interrupted_experiment(workdir, env, "big", max_trials=trials + 2)
    generated = generate_engine_ledger(env, big, entries)
    sizes["engine"] = ledger_sizes(big)
    columns["engine"] = measure(big, big_manifest, env, runs)
    pad_attempts(big, entries)
    sizes["both"] = ledger_sizes(big)
    columns["both"] = measure(big, big_manifest, env, runs)
    e2e["both"] = end_to_end(big, big_manifest, env, kill=True)

    heads = {
        "small": "small",
        "attempts": "attempts big",
        "engine": "engine big",
        "both": "both big",
    }
    print(f"   median of {runs} runs per column, ms; ledgers per column:")
    for key, head in heads.items():
        print(f"     {head:<13} {sizes[key]}")
    print(
        f"   engine ledger: {generated['bytes'] / 1e6:.1f} MB; attempts ledger of "
        f"{entries:,} lines: {big.attempts.stat().st_size / 1e6:.1f} MB"
    )
    print("   " + f"{'step':<38}" + "".join(f"{h:>14}" for h in heads.values()))
    for name in columns["small"]:
        cells = "".join(f"{ms(columns[k][name]):>14}" for k in heads)
        print(f"   {name:<38}{cells}")
    print(
        f"   {'resume_experiment, end to end (1 run)':<38}{'':>14}"
        f"{ms(e2e['attempts']):>14}{'':>14}{ms(e2e['both']):>14}"
    )
    worst = max(columns[k]["total (median of sums)"] for k in heads)
    verdict = "MET" if worst < TARGET_S and max(e2e.values()) < TARGET_S else "MISSED"
    print(
        f"   target < {TARGET_S * 1000:.0f} ms: {verdict} (worst total {ms(worst)} ms, "
        f"end to end {ms(max(e2e.values()))} ms)"
    )
    attempts_cost = (
        columns["both"]["attempts: log (tail read + append)"]
        - columns["small"]["attempts: log (tail read + append)"]
    )
    print(
        wrap(
            f"the attempts ledger costs +{ms(attempts_cost)} ms at {entries:,} lines: the next "
            f"attempt number is read from its last line only, under the ledger's flock. The "
            f"engine ledger is never read by automl-setup's check (columns 'small' vs "
            f"'engine big').",
            "   ",
            "   ",
        )
    )


# --------------------------------------------------------------------------------------------
# 3. Engine replay


def engine_replay(workdir: Path, env: Path, sizes: list[int]) -> None:
    print("\n3. engine replay (context): the installed engine's `status --json` by ledger size")
    files, _manifest = interrupted_experiment(workdir, env, "replay", max_trials=max(sizes))
    engine = str(env / "bin" / ENGINE_CLI)
    argv = [engine, "status", "--experiment-id", files.experiment_id]
    argv += ["--workspace", str(files.workspace), "--json"]
    events = len((files.engine_dir / "ledger.jsonl").read_bytes().splitlines())
    fixed = statistics.median(timed_run(argv) for _ in range(3))
    print(
        f"   {events:>7,} events: {fixed:8.2f} s  (interpreter start and imports: subtracted below)"
    )
    timings = []
    for size in sizes:
        generate_engine_ledger(env, files, size)
        elapsed = timed_run(argv)
        timings.append((size, max(elapsed - fixed, 1e-3)))
        print(f"   {size:>7,} events: {elapsed:8.2f} s", flush=True)
    (n0, t0), (n1, t1) = timings[0], timings[-1]
    if n1 > n0 and t1 > t0:
        exponent = math.log(t1 / t0) / math.log(n1 / n0)
        guess = t1 * (100_000 / n1) ** exponent
        print(
            wrap(
                f"replay time grows as n^{exponent:.1f}; extrapolated, status at 100,000 events "
                f"takes about {guess / 3600:,.1f} h and the engine's resume twice that (it "
                "replays for its snapshot check too). automl-setup's `status` and the install "
                "guard run the engine's status with a 60 s timeout.",
                "   ",
                "   ",
            )
        )


# --------------------------------------------------------------------------------------------
# 4. Many experiments


def scale_sizes(most: int) -> list[int]:
    sizes = [n for n in (10, 100, 1_000, 10_000) if n < most]
    return [*sizes, most]


def many_experiments(workdir: Path, env: Path, most: int, runs: int, before: Path | None) -> None:
    sizes = scale_sizes(most)
    print(f"\n4. many experiments: list and status in workspaces of {', '.join(map(str, sizes))}")
    cache = workdir / "status-cache"
    env_vars = {**clean_env(), "AUTOML_SETUP_STATUS_CACHE": str(cache)}
    trees = {"after": (automl_setup_argv(), env_vars)}
    if before is not None:
        old = [sys.executable, "-P", "-m", "mcp_server.faces.cli"]  # -P: no cwd on sys.path
        trees = {"before": (old, {**env_vars, "PYTHONPATH": str(before)}), **trees}
    figures: dict[str, dict[int, dict[str, object]]] = {tree: {} for tree in trees}
    for size in sizes:
        manifest = write_manifest(workdir / f"scale-{size}.yaml", "scale", max_trials=2, sleep=0.0)
        workspace = workdir / f"ws-scale-{size}"
        argv = [*automl_setup_argv(), "launch", "--manifest", str(manifest), "--python", str(env)]
        timed_run([*argv, "--workspace", str(workspace)])
        clone_experiments(env, ExperimentFiles(workspace.resolve(), "scale"), size)
        for tree, (cli, variables) in trees.items():
            shutil.rmtree(cache, ignore_errors=True)
            figures[tree][size] = measure_scale(
                cli, variables, workspace.resolve(), runs, new=tree == "after"
            )
            print(f"   {size:,} experiments, {tree}: list {figures[tree][size]['list']:.2f} s",
                  flush=True)  # fmt: skip
    report(sizes, figures)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per figure (default 7)")
    parser.add_argument("--entries", type=int, default=100_000, help="big ledger lines")
    parser.add_argument(
        "--engine-sizes",
        default="500,1000,2000",
        help="engine ledger sizes for section 3 (comma separated; '' skips)",
    )
    parser.add_argument(
        "--experiments", type=int, metavar="N", help="section 4 up to N experiments (e.g. 1000)"
    )
    parser.add_argument("--before", type=Path, help="sections 1 and 4: also this tree's CLI")
    parser.add_argument("--only", default="1,2,3,4", help="sections to run (default all)")
    parser.add_argument("--workdir", type=Path, help="default: a new temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the workdir")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="automl-setup-bench-exp-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"{uv_version()}, Python {sys.version.split()[0]}")
    print(f"workdir {workdir}; {load_average()} at the start")
    try:
        repo = SourceRepository(workdir / "repo")
        repo.commit_engine("main", marker="bench")
        profile = EngineProfile(
            repository=repo.url,
            subdirectory=DEFAULT_SUBDIRECTORY,
            distribution=REFERENCE_DISTRIBUTION,
        )
        env = workdir / "env"
        operations.install(
            InstallRequest(profile=profile, python=str(env), branch="main", create_env=True)
        )
        only = {part.strip() for part in args.only.split(",")}
        if "1" in only:
            launch_overhead(workdir, env, args.runs, args.before)
        if "2" in only:
            resume_check(workdir, env, args.runs, args.entries)
        sizes = [int(s) for s in args.engine_sizes.split(",") if s.strip()]
        if sizes and "3" in only:
            engine_replay(workdir, env, sizes)
        if args.experiments and "4" in only:
            many_experiments(workdir, env, args.experiments, args.runs, args.before)
    finally:
        print(f"\n{load_average()} at the end")
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
