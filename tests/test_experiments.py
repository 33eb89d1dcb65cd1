"""Experiments bound to an exact engine build: launch, its refusals, the install guard, status,
the attempts ledger and the engine's read-only plan.

Everything is real: a git repository built from the reference engine, `uv` installs into real
virtual environments, the `automl-setup` command line as a process, the engine as a process,
real signals. The helpers here are shared with `test_experiments_resume.py`.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import engine_marker, env_snapshot, profile_args, run_cli, tree_digest
from refengine_helpers import holdable, holding

from mcp_server.environment.wheelstore import WheelStore
from mcp_server.source.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    SourceRepository,
    quadratic_manifest,
)

EXP = "exp"
ENGINE_CLI = "automl-refengine"
PR_SET_CHILD_SUBREAPER = 36
WAIT_S = 60.0


# --------------------------------------------------------------------------------------------
# Manifests, files and polling


def manifest_data(
    experiment_id: str = EXP,
    *,
    seed: int = 5,
    max_trials: int = 4,
    sleep: float = 0.2,
    total_timeout_s: float = 300.0,
    hold: Path | None = None,
) -> dict[str, Any]:
    """A small random search over the quadratic workload of the installed engine (its trials
    holdable by `hold`, if given). Holding never changes a result: the loss depends only on
    the params."""
    data = quadratic_manifest(
        experiment_id,
        seed=seed,
        max_trials=max_trials,
        sleep=sleep,
        total_timeout_s=total_timeout_s,
    )
    if hold is not None:
        data["workload"]["argv"] = holdable(data["workload"]["argv"], hold)
    return data


def write_manifest(path: Path, **kwargs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(manifest_data(**kwargs), sort_keys=False), encoding="utf-8")
    return path


def wait_for(what: str, check: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@dataclass
class Experiment:
    """One experiment of a workspace, seen through its files."""

    manifest: Path
    workspace: Path
    env: Path
    experiment_id: str = EXP
    hold: Path | None = None  # the hold file its manifest's trials obey (see `holding`)

    @property
    def engine_dir(self) -> Path:
        return self.workspace / self.experiment_id

    @property
    def sidecar(self) -> Path:
        return self.workspace / ".automl-setup" / self.experiment_id

    @property
    def binding(self) -> Path:
        return self.sidecar / "binding.json"

    @property
    def attempts_path(self) -> Path:
        return self.sidecar / "attempts.jsonl"

    def attempts(self) -> list[dict[str, Any]]:
        return read_jsonl(self.attempts_path)

    def engine_state(self) -> dict[str, Any] | None:
        path = self.engine_dir / "state.json"
        return json.loads(path.read_bytes()) if path.exists() else None

    def trials_done(self) -> int:
        state = self.engine_state()
        trials = state["trials"] if state else []
        return sum(t["status"] in ("succeeded", "failed") for t in trials)

    def engine_events(self, kind: str | None = None) -> list[dict[str, Any]]:
        events = read_jsonl(self.engine_dir / "ledger.jsonl")
        return [e for e in events if kind is None or e["event"] == kind]

    def finished_trials(self) -> list[tuple[int, str, float | None]]:
        """(index, params, value) of every finished trial, from the engine's own ledger."""
        params = {e["index"]: e["params"] for e in self.engine_events("trial_started")}
        return sorted(
            (e["index"], json.dumps(params[e["index"]], sort_keys=True), e["value"])
            for e in self.engine_events("trial_finished")
        )

    def cli(self, command: str, *extra: str, manifest: Path | None = None) -> Any:
        """`automl-setup launch|resume` for this experiment (foreground unless extra says)."""
        args = [command]
        if command == "resume":
            args += ["--experiment-id", self.experiment_id]
        args += ["--manifest", str(manifest or self.manifest), "--workspace", str(self.workspace)]
        args += ["--python", str(self.env), *extra]
        return run_cli(*args)

    def status(self) -> dict[str, Any]:
        result = run_cli(
            "status", "--experiment-id", self.experiment_id, "--workspace", str(self.workspace),
            "--json",
        )  # fmt: skip
        assert result.code == 0, result.output
        return json.loads(result.stdout)


# --------------------------------------------------------------------------------------------
# Processes: the detached engine is reparented to the test process (a child subreaper), so
# the test can reap it and read its real exit status. (Without this, an init that never reaps
# would leave zombies that still answer kill(pid, 0) and look alive to the engine.)


class Reaper:
    def __init__(self) -> None:
        self.pids: list[int] = []
        self.reaped: set[int] = set()

    def adopt(self, pid: int) -> int:
        self.pids.append(pid)
        return pid

    def reap(self, pid: int, timeout: float = WAIT_S) -> int:
        """Wait for an adopted process to exit; its exit code (negative: killed by signal)."""
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                self.reaped.add(pid)
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                raise AssertionError(f"process {pid} did not exit within {timeout} s")
            time.sleep(0.02)

    def cleanup(self) -> None:
        """A failed test must not leave an engine running (or a zombie behind)."""
        for pid in self.pids:
            if pid in self.reaped:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def subreaper() -> Iterator[Reaper]:
    """Make this process the child subreaper for the duration (a fixture body)."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, ctypes.get_errno()
    reaper = Reaper()
    try:
        yield reaper
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        reaper.cleanup()


@pytest.fixture(name="reaper")
def reaper_fixture() -> Iterator[Reaper]:
    yield from subreaper()


def launch_detached(exp: Experiment, reaper: Reaper) -> int:
    result = exp.cli("launch", "--detach", "--json")
    assert result.code == 0, result.output
    started = json.loads(result.stdout)
    assert started["detached"] is True and started["exit_code"] is None
    return reaper.adopt(started["pid"])


def interrupt(exp: Experiment, reaper: Reaper, pid: int, *, after_trials: int = 1) -> None:
    """SIGTERM the detached engine once `after_trials` trials finished; it saves and exits 143."""
    wait_for(f"{after_trials} finished trials", lambda: exp.trials_done() >= after_trials)
    os.kill(pid, signal.SIGTERM)
    assert reaper.reap(pid) == 143


def make_interrupted(
    tmp_path: Path, env: Path, reaper: Reaper, *, after_trials: int = 1, **manifest: Any
) -> Experiment:
    """Launched, then SIGTERMed once `after_trials` trials finished. The next trial is held
    until then, so the engine is surely still running (exit 143, not 0) however slow the
    machine; the hold is gone when this returns, and `exp.hold` can hold a resume."""
    hold = tmp_path / "hold"
    path = write_manifest(tmp_path / "manifest.yaml", hold=hold, **manifest)
    exp = Experiment(path, tmp_path / "ws", env, hold=hold)
    with holding(hold, after_trials):
        pid = launch_detached(exp, reaper)
        interrupt(exp, reaper, pid, after_trials=after_trials)
    assert exp.status()["state"] == "interrupted"
    return exp


@pytest.fixture(name="interrupted")
def interrupted_fixture(tmp_path: Path, installed_env: Path, reaper: Reaper) -> Experiment:
    """An experiment launched on the `main` build and stopped by SIGTERM after one trial."""
    return make_interrupted(tmp_path, installed_env, reaper)


# --------------------------------------------------------------------------------------------
# "Nothing changed", and exactly one refused attempt


@dataclass(frozen=True)
class Frozen:
    workspace: dict[str, str]  # every file of the workspace except the attempts ledger
    paths: list[str]  # every path of the workspace, directories included
    engine_dir: dict[str, str]
    binding: bytes | None
    attempts: bytes
    envs: dict[str, dict[str, str]]


def freeze(exp: Experiment, *envs: Path) -> Frozen:
    def not_attempts(rel: Path) -> bool:
        return rel.name == "attempts.jsonl"

    return Frozen(
        workspace=tree_digest(exp.workspace, skip=not_attempts),
        paths=sorted(str(p.relative_to(exp.workspace)) for p in exp.workspace.rglob("*")),
        engine_dir=tree_digest(exp.engine_dir),
        binding=exp.binding.read_bytes() if exp.binding.exists() else None,
        attempts=exp.attempts_path.read_bytes() if exp.attempts_path.exists() else b"",
        envs={str(e): env_snapshot(e) for e in envs},
    )


def assert_unchanged(before: Frozen, after: Frozen) -> None:
    assert after.binding == before.binding, "the binding changed"
    assert after.engine_dir == before.engine_dir, "the engine's experiment directory changed"
    assert after.workspace == before.workspace, "files of the workspace changed"
    assert after.paths == before.paths, "paths were created or removed in the workspace"
    assert after.envs == before.envs, "an environment changed"


def assert_refused_once(
    exp: Experiment,
    before: Frozen,
    *envs: Path,
    reason: str,
    fields: tuple[str, ...] = (),
    action: str = "resume",
) -> dict[str, Any]:
    """Nothing changed except exactly one `refused` line appended to the attempts ledger."""
    after = freeze(exp, *envs)
    assert_unchanged(before, after)
    assert after.attempts.startswith(before.attempts), "the attempts ledger was rewritten"
    added = after.attempts[len(before.attempts) :].splitlines()
    assert len(added) == 1, added
    entry: dict[str, Any] = json.loads(added[0])
    assert entry["action"] == action and entry["outcome"] == "refused", entry
    assert entry["pid"] is None and entry["log"] is None, entry
    assert reason in entry["reason"], entry
    found = {d["field"] for d in entry["differences"]}
    assert set(fields) <= found, (fields, found)
    return entry


def installed_file(env: Path, name: str) -> Path:
    (path,) = env.glob(f"lib/python*/site-packages/automl_refengine/{name}")
    return path


# --------------------------------------------------------------------------------------------
# Launch


@pytest.mark.slow
def test_launch_foreground_binds_the_verified_build(
    tmp_path: Path, installed_env: Path, source_repo: SourceRepository
) -> None:
    exp = Experiment(
        write_manifest(tmp_path / "m.yaml", max_trials=2, sleep=0.0), tmp_path / "ws", installed_env
    )
    result = exp.cli("launch", "--json")
    assert result.code == 0, result.output
    started = json.loads(result.stdout)
    record = json.loads((installed_env / ".automl-setup" / "engine-record.json").read_bytes())
    assert started["exit_code"] == 0 and started["detached"] is False
    assert started["engine_commit"] == source_repo.head("main") == record["source"]["commit"]

    binding = json.loads(exp.binding.read_bytes())
    assert binding["experiment_id"] == EXP
    assert binding["engine"]["identity_digest"] == record["identity_digest"]
    assert binding["engine"]["source"] == record["source"]
    assert binding["engine"]["build"] == record["build"]
    assert binding["engine"]["cli"] == ENGINE_CLI
    assert binding["manifest_sha256"] == hashlib.sha256(exp.manifest.read_bytes()).hexdigest()
    # The environment's own interpreter runs the engine's console script (never its shebang).
    assert binding["argv"][:2] == [str(installed_env / "bin" / "python"), "-I"]
    assert binding["argv"][4:] == [
        REFERENCE_DISTRIBUTION, ENGINE_CLI,
        "run", "--manifest", str(exp.manifest), "--workspace", str(exp.workspace), "--approve",
    ]  # fmt: skip

    attempts = exp.attempts()
    assert [(a["attempt"], a["action"], a["outcome"]) for a in attempts] == [
        (1, "launch", "accepted"),
        (2, "exit", "exited"),
    ]
    assert attempts[0]["identity_digest"] == record["identity_digest"]
    assert attempts[1]["exit_code"] == 0 and attempts[1]["pid"] == started["pid"]
    assert Path(attempts[0]["log"]).read_text()  # the engine's output went to the attempt log
    assert exp.status()["state"] == "completed"
    # The environment knows the experiment is bound to it (for the install guard).
    (entry,) = (installed_env / ".automl-setup" / "experiments").glob(f"{EXP}--*.json")
    assert json.loads(entry.read_bytes())["workspace"] == str(exp.workspace)


@pytest.mark.slow
def test_launch_refuses_an_existing_experiment_id(tmp_path: Path, installed_env: Path) -> None:
    exp = Experiment(
        write_manifest(tmp_path / "m.yaml", max_trials=1, sleep=0.0), tmp_path / "ws", installed_env
    )
    assert exp.cli("launch").code == 0
    before = freeze(exp, installed_env)

    result = exp.cli("launch")

    assert result.code == 1, result.output
    assert f"experiment {EXP} already exists in {exp.workspace}" in result.stderr
    assert f"automl-setup resume --experiment-id {EXP}" in result.stderr
    # Its own ledger records the refused launch; nothing else changed.
    assert_refused_once(exp, before, installed_env, reason="already exists", action="launch")


@pytest.mark.slow
@pytest.mark.shares_installed_env
def test_launch_refuses_when_only_the_engine_directory_exists(
    tmp_path: Path, installed_env: Path
) -> None:
    """An experiment started by the engine directly (no binding) is not adopted by launch."""
    exp = Experiment(
        write_manifest(tmp_path / "m.yaml", max_trials=1, sleep=0.0), tmp_path / "ws", installed_env
    )
    engine = installed_env / "bin" / ENGINE_CLI
    argv = [str(engine), "run", "--manifest", str(exp.manifest), "--workspace", str(exp.workspace)]
    subprocess.run([*argv, "--approve"], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    before = freeze(exp, installed_env)

    result = exp.cli("launch")

    assert result.code == 1 and "already exists" in result.stderr, result.output
    assert_unchanged(before, freeze(exp, installed_env))
    assert not exp.sidecar.exists()


@pytest.mark.slow
def test_launch_refuses_an_engine_that_fails_verification(
    tmp_path: Path, installed_env: Path
) -> None:
    tampered = installed_file(installed_env, "search.py")
    tampered.write_text(tampered.read_text() + "# edited after install\n")
    exp = Experiment(write_manifest(tmp_path / "m.yaml"), tmp_path / "ws", installed_env)
    env_before = env_snapshot(installed_env)

    result = exp.cli("launch", "--detach")

    assert result.code == 1, result.output
    assert f"the engine in {installed_env} fails verification (mismatch)" in result.stderr
    assert "file automl_refengine/search.py" in result.stderr
    assert f"automl-setup verify --python {installed_env}" in result.stderr
    assert not exp.workspace.exists(), "a refused launch created files"
    assert env_snapshot(installed_env) == env_before


def plain_engine_env(tmp_path: Path, source_repo: SourceRepository) -> Path:
    """A venv where the engine wheel was installed by plain `uv pip install`: no record."""
    from mcp_server.source.wheelbuild import uv_binary

    uv = uv_binary()
    source = source_repo.work / source_repo.subdirectory
    dist, env = tmp_path / "plain-dist", tmp_path / "plain-env"
    clean = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}

    def run(*argv: str) -> None:
        subprocess.run(
            [uv, *argv], check=True, capture_output=True, env=clean, stdin=subprocess.DEVNULL
        )

    run("build", "--wheel", "--no-progress", "--out-dir", str(dist), str(source))
    run("venv", "--quiet", "--python", sys.executable, str(env))
    (wheel,) = dist.glob("*.whl")
    run("pip", "install", "--no-progress", "--python", str(env / "bin" / "python"), str(wheel))
    assert (env / "bin" / ENGINE_CLI).exists()
    return env


@pytest.mark.slow
def test_launch_refuses_an_engine_without_record(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    plain = plain_engine_env(tmp_path, source_repo)
    exp = Experiment(write_manifest(tmp_path / "m.yaml"), tmp_path / "ws", plain)
    env_before = env_snapshot(plain)

    result = exp.cli("launch", "--detach")

    assert result.code == 3, result.output
    assert f"no engine installed by automl-setup in {plain} (no record)" in result.stderr
    assert f"automl-setup install --branch BRANCH --python {plain}" in result.stderr
    assert not exp.workspace.exists()
    assert env_snapshot(plain) == env_before


@pytest.mark.slow
def test_refusals_write_nothing_into_an_environment_without_record(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    plain = plain_engine_env(tmp_path, source_repo)
    exp = Experiment(write_manifest(tmp_path / "m.yaml"), tmp_path / "ws", plain)
    before = tree_digest(plain)
    assert exp.cli("launch", "--detach").code == 3
    assert not (plain / ".automl-setup").exists()
    assert tree_digest(plain) == before


# --------------------------------------------------------------------------------------------
# Install guard (transition rule 2)


@pytest.mark.slow
def test_install_guard_refuses_a_new_engine_under_an_unfinished_experiment(
    source_repo: SourceRepository, installed_env: Path, interrupted: Experiment,
    wheel_store: Path, tmp_path: Path,
) -> None:  # fmt: skip
    env_before = env_snapshot(installed_env)
    workspace_before = freeze(interrupted)
    dev = source_repo.head("dev/next")
    asked = ["--branch", "dev/next", "--expect-commit", dev]
    install = ["install", *asked, "--python", str(installed_env), *profile_args(source_repo)]
    # The installed main wheel as a reviewed wheel: not the recorded source build either.
    record = json.loads((installed_env / ".automl-setup" / "engine-record.json").read_text())
    sha = record["build"]["wheel_sha256"]
    stored = WheelStore(wheel_store).find(sha)
    assert stored is not None
    wheel = Path(shutil.copy(stored.path, tmp_path))
    for source in (asked, ["--commit", dev], ["--wheel", str(wheel), "--sha256", sha]):
        where = ["--python", str(installed_env), *profile_args(source_repo)]
        refused = run_cli("install", *source, *where)

        assert refused.code == 1, refused.output
        assert "unfinished experiments are bound to the engine in" in refused.stderr
        assert f"{EXP} ({interrupted.workspace})" in refused.stderr
        # The remedy asks for the same engine, elsewhere: copied as it is, it installs it.
        # ... from the same engine: the profile where it is not the default.
        engine = ["--repository", source_repo.url, "--distribution", REFERENCE_DISTRIBUTION]
        again = ["automl-setup", "install", *source, *engine, "--python"]
        assert f"environment instead: {shlex.join(again)} NEW --create-env\n" in refused.stderr
        assert env_snapshot(installed_env) == env_before
    assert engine_marker(installed_env) == "main-1"
    after = freeze(interrupted)
    assert_unchanged(workspace_before, after)
    assert after.attempts == workspace_before.attempts

    resumed = interrupted.cli("resume")
    assert resumed.code == 0, resumed.output
    assert interrupted.status()["state"] == "completed"

    allowed = run_cli(*install)
    assert allowed.code == 0, allowed.output
    assert engine_marker(installed_env) == "dev-next-1"


# --------------------------------------------------------------------------------------------
# status and experiments


@pytest.mark.slow
def test_status_and_experiments_report_state_trials_best_and_bound_commit(
    source_repo: SourceRepository, interrupted: Experiment
) -> None:
    commit = source_repo.head("main")
    status = interrupted.status()
    assert status["experiment_id"] == EXP
    assert status["state"] == "interrupted"
    assert status["controller_running"] is False
    assert 1 <= status["trials_done"] < 4
    assert status["bound_commit"] == commit and status["bound_ref"] == "refs/heads/main"
    assert status["best"]["metric"] == "loss" and isinstance(status["best"]["value"], float)
    assert status["best"] == interrupted.engine_state()["best"]
    assert status["attempts_torn_line"] is None and status["notes"] == []
    assert status["last_attempt"]["action"] == "launch"

    assert interrupted.cli("resume").code == 0
    listing = run_cli("experiments", "--workspace", str(interrupted.workspace), "--json")
    assert listing.code == 0, listing.output
    (row,) = json.loads(listing.stdout)["experiments"]
    assert row["experiment_id"] == EXP
    assert row["state"] == "completed"
    assert row["trials_done"] == 4
    assert row["best"] == interrupted.engine_state()["best"]
    assert row["bound_commit"] == commit
    assert row["last_attempt"]["action"] == "exit" and row["last_attempt"]["exit_code"] == 0

    text = run_cli("experiments", "--workspace", str(interrupted.workspace))
    assert f"{EXP}: completed" in text.stdout and "trials done: 4" in text.stdout
    assert commit in text.stdout


def test_experiments_of_an_empty_workspace(tmp_path: Path) -> None:
    result = run_cli("experiments", "--workspace", str(tmp_path / "nothing"), "--json")
    assert result.code == 0, result.output
    listing = json.loads(result.stdout)
    assert listing["experiments"] == [] and listing["unreadable"] == []
    assert not (tmp_path / "nothing").exists()


def test_status_of_an_unknown_experiment(tmp_path: Path) -> None:
    result = run_cli("status", "--experiment-id", "nope", "--workspace", str(tmp_path), "--json")
    assert result.code == 3, result.output
    assert (
        "no experiment 'nope' launched by automl-setup"
        in json.loads(result.stdout)["error"]["cause"]
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_status_and_install_guard_survive_an_engine_status_that_hangs(
    interrupted: Experiment, installed_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_server.experiments import engine
    from mcp_server.experiments.registered import unfinished_experiments
    from mcp_server.experiments.status import experiment_status
    from mcp_server.requests import StatusQuery

    # The real engine's `status` now blocks opening its ledger (a FIFO nobody writes to).
    ledger = interrupted.engine_dir / "ledger.jsonl"
    ledger.unlink()
    os.mkfifo(ledger)
    monkeypatch.setattr(engine, "STATUS_TIMEOUT_S", 1.0)  # instead of waiting 60 s

    status = experiment_status(StatusQuery(experiment_id=EXP, workspace=str(interrupted.workspace)))
    assert status.trials_done is None and status.notes  # reported, not raised
    unfinished = unfinished_experiments(installed_env / ".automl-setup")
    assert [e.experiment_id for e in unfinished] == [EXP]  # doubt keeps it bound


TORN = b'{"action":"resume","attempt":3,"ho'


@pytest.mark.slow
def test_status_reports_a_torn_last_line_of_the_attempts_ledger(interrupted: Experiment) -> None:
    lines = len(interrupted.attempts())
    with interrupted.attempts_path.open("ab") as ledger:
        ledger.write(TORN)
    before = interrupted.attempts_path.read_bytes()

    status = interrupted.status()

    assert status["attempts_torn_line"] == lines + 1
    assert f"attempts ledger line {lines + 1} is torn (interrupted write)" in status["notes"]
    assert status["last_attempt"]["attempt"] == lines  # the last whole entry
    text = run_cli("status", "--experiment-id", EXP, "--workspace", str(interrupted.workspace))
    assert f"note: attempts ledger line {lines + 1} is torn" in text.stdout
    assert interrupted.attempts_path.read_bytes() == before  # reported, never repaired


@pytest.mark.slow
def test_a_torn_attempts_line_is_still_reported_after_the_next_attempt(
    tmp_path: Path, interrupted: Experiment
) -> None:
    lines = len(interrupted.attempts())
    with interrupted.attempts_path.open("ab") as ledger:
        ledger.write(TORN)
    other = write_manifest(tmp_path / "other.yaml", seed=99)
    assert interrupted.cli("resume", manifest=other).code == 1  # any further attempt
    status = interrupted.status()
    assert status["attempts_torn_line"] == lines + 1


# --------------------------------------------------------------------------------------------
# The engine's plan writes nothing


def engine_plan(env: Path, manifest: Path, workspace: Path) -> dict[str, Any]:
    """The installed engine's own `plan`, through its console script."""
    argv = [str(env / "bin" / ENGINE_CLI), "plan", "--manifest", str(manifest)]
    argv += ["--workspace", str(workspace), "--json"]
    proc = subprocess.run(
        argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.mark.slow
def test_engine_plan_leaves_the_workspace_untouched(
    tmp_path: Path, installed_env: Path, interrupted: Experiment
) -> None:
    fresh = tmp_path / "fresh-ws"
    planned = engine_plan(installed_env, interrupted.manifest, fresh)
    assert len(planned["trials"]) == 4 and planned["run_would_refuse"] is False
    assert not fresh.exists()

    before = freeze(interrupted, installed_env)
    assert engine_plan(installed_env, interrupted.manifest, interrupted.workspace)[
        "run_would_refuse"
    ]
    after = freeze(interrupted, installed_env)
    assert_unchanged(before, after)
    assert after.attempts == before.attempts
    # The plan is the trials the run actually launched: same params, index by index.
    ran = {e["index"]: e["params"] for e in interrupted.engine_events("trial_started")}
    for trial in planned["trials"]:
        if trial["index"] in ran:
            assert ran[trial["index"]] == trial["params"]
