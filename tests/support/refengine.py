"""Helpers for the reference engine tests: real engine processes, real files, no mocks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
ENGINE_SRC = REPO / "mcp_server" / "reference_engine" / "src"
EXAMPLE = REPO / "mcp_server" / "reference_engine" / "examples" / "quadratic.yaml"
QUADRATIC = ["{python}", "-m", "automl_refengine.workloads.quadratic"]

# A workload that fails (exit 3) whenever params["opt"] == "bad", else reports loss = x.
FAIL_ON_BAD = (
    "import json, sys\n"
    "p = json.load(open(sys.argv[1]))\n"
    "if p['opt'] == 'bad': sys.exit(3)\n"
    "json.dump(dict(loss=p['x']), open('metrics.json', 'w'))\n"
)

# Runs the rest of its argv (exec: same pid) unless the hold file names an index at or below
# its trial's: then it waits until the file is gone or names a higher one. See `holding`.
# No braces: the engine expands {name} in every argument.
_HOLD = (
    "import os, sys, time\n"
    "hold, index = sys.argv[1], int(sys.argv[2].rsplit('-', 1)[1])\n"
    "while True:\n"
    "    try:\n"
    "        first = open(hold).read().strip()\n"
    "    except FileNotFoundError:\n"
    "        break\n"
    "    if first.isdigit() and index < int(first):\n"
    "        break\n"
    "    time.sleep(0.02)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


def holdable(argv: list[str], hold: Path) -> list[str]:
    """A workload argv (starting with "{python}") whose trials `holding(hold, ...)` can hold.
    The manifest stays the same whatever is held, so a resume accepts it."""
    assert argv[0] == "{python}", argv
    return ["{python}", "-c", _HOLD, str(hold), "{trial_dir}", *argv]


@contextlib.contextmanager
def holding(hold: Path, first: int) -> Iterator[None]:
    """Inside the block, trials from index `first` on cannot finish: an engine interrupted
    there is surely mid-trial, however slow the machine (`hold.write_text(str(k))` inside moves
    the boundary to k). The hold is gone after the block, even on failure, so no held trial
    outlives the test."""
    hold.write_text(str(first))  # a reader that sees it empty keeps waiting
    try:
        yield
    finally:
        hold.unlink(missing_ok=True)


def engine_env(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env["PYTHONPATH"] = str(ENGINE_SRC)
    env.update(extra)
    return env


def engine(*args: object, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "automl_refengine", *map(str, args)],
        env=engine_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def start_engine(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "automl_refengine", *map(str, args)],
        env=engine_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def manifest_data(
    *,
    experiment_id: str = "exp",
    algorithm: str = "random",
    seed: int = 3,
    max_trials: int = 4,
    trial_timeout_s: float = 30,
    total_timeout_s: float = 120,
    sleep: float = 0.0,
    parameters: dict[str, Any] | None = None,
    argv: list[str] | None = None,
    pass_env: list[str] | None = None,
) -> dict[str, Any]:
    """A valid manifest running the quadratic workload; every field can be overridden."""
    if argv is None:
        argv = [*QUADRATIC, "--params", "{params_json}", "--out", "{trial_dir}/metrics.json"]
        argv += ["--sleep", str(sleep)]
    return {
        "search": {
            "experiment_id": experiment_id,
            "algorithm": algorithm,
            "seed": seed,
            "objective": {"metric": "loss", "direction": "minimize"},
            "budget": {
                "max_trials": max_trials,
                "trial_timeout_s": trial_timeout_s,
                "total_timeout_s": total_timeout_s,
            },
            "parameters": parameters
            or {
                "x": {"type": "float", "low": -1.0, "high": 1.0},
                "y": {"type": "float", "low": -1.0, "high": 1.0},
                "opt": {"type": "categorical", "choices": ["adam", "sgd"]},
            },
        },
        "workload": {"argv": argv, "metrics_file": "metrics.json"},
        # The engine runs from the source tree here, so its trials need PYTHONPATH.
        "execution": {"pass_env": ["PYTHONPATH", *(pass_env or [])]},
    }


def write_manifest(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def example_manifest(tmp_path: Path) -> Path:
    """The shipped example, with PYTHONPATH passed through (the engine is not installed)."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["execution"]["pass_env"].append("PYTHONPATH")
    return write_manifest(tmp_path / "quadratic.yaml", data)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for directories)."""
    if not root.exists():
        return {}
    tree: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        tree[str(path.relative_to(root))] = None if path.is_dir() else path.read_bytes()
    return tree


def wait_for(predicate: Callable[[], bool], timeout: float = 30, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")
        time.sleep(interval)


def ledger(workspace: Path, experiment_id: str = "exp") -> list[dict[str, Any]]:
    """The complete lines of the ledger (a line being written is left out)."""
    path = workspace / experiment_id / "ledger.jsonl"
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")[:-1]
    return [json.loads(line) for line in lines]


def events(workspace: Path, kind: str, experiment_id: str = "exp") -> list[dict[str, Any]]:
    return [e for e in ledger(workspace, experiment_id) if e["event"] == kind]


def trial_started(workspace: Path, index: int, experiment_id: str = "exp") -> bool:
    return any(e["index"] == index for e in events(workspace, "trial_started", experiment_id))


def status(workspace: Path, experiment_id: str = "exp") -> dict[str, Any]:
    result = engine("status", "--experiment-id", experiment_id, "--workspace", workspace, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def plan_json(manifest: Path, workspace: Path) -> dict[str, Any]:
    result = engine("plan", "--manifest", manifest, "--workspace", workspace, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_group(pgid: int) -> None:
    """Clean up a trial group a test deliberately orphaned."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_for(lambda: not group_alive(pgid))
