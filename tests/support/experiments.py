"""Experiments as the tests drive them: a manifest, the CLI against one workspace, a child
subreaper for detached engines, and the "nothing changed" checks of a refusal."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from support.cli import run_cli
from support.refengine import holdable, holding
from support.trees import env_snapshot, tree_digest

from mcp_server.source.sourcerepo import (
    SourceRepository,
    quadratic_manifest,
)

EXP = "exp"


ENGINE_CLI = "automl-refengine"


PR_SET_CHILD_SUBREAPER = 36


WAIT_S = 60.0


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

    @property
    def engine_ledger(self) -> Path:
        return self.engine_dir / "ledger.jsonl"

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


def plain_engine_env(tmp_path: Path, source_repo: SourceRepository) -> Path:
    """A venv where the engine wheel was installed by plain `uv pip install`: no record."""
    from mcp_server.children.uv import uv_binary

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


def engine_plan(env: Path, manifest: Path, workspace: Path) -> dict[str, Any]:
    """The installed engine's own `plan`, through its console script."""
    argv = [str(env / "bin" / ENGINE_CLI), "plan", "--manifest", str(manifest)]
    argv += ["--workspace", str(workspace), "--json"]
    proc = subprocess.run(
        argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))
