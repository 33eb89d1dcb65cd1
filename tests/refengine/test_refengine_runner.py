"""The reference engine's controller: budgets, timeouts, lock, cancel, corrupt state."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml
from support.refengine import (
    FAIL_ON_BAD,
    engine,
    events,
    example_manifest,
    holdable,
    holding,
    ledger,
    manifest_data,
    plan_json,
    snapshot,
    start_engine,
    status,
    trial_started,
    wait_for,
    write_manifest,
)


def run(manifest: Path, workspace: Path) -> tuple[int, dict]:
    result = engine("run", "--manifest", manifest, "--workspace", workspace, "--approve", "--json")
    return result.returncode, json.loads(result.stdout)


def test_example_manifest_runs_to_completion(tmp_path: Path) -> None:
    manifest = example_manifest(tmp_path)
    code, result = run(manifest, tmp_path / "ws")
    assert code == 0, result
    report = result["status"]
    assert report["state"] == "completed"
    assert report["trials_done"] == report["trials_succeeded"] == 8
    root = tmp_path / "ws" / "quadratic-demo"
    assert json.loads((root / "best.json").read_text()) == report["best"]
    best = report["best"]
    x, y = best["params"]["x"], best["params"]["y"]
    offset = {"adam": 0.0, "sgd": 0.05, "rmsprop": 0.1}[best["params"]["opt"]]
    assert best["value"] == pytest.approx((x - 0.3) ** 2 + (y + 0.1) ** 2 + offset)
    trial = root / "trial-00000"
    assert {p.name for p in trial.iterdir()} == {
        "params.json",
        "stdout.log",
        "stderr.log",
        "metrics.json",
    }
    state = json.loads((root / "state.json").read_text())
    assert state["ledger_events"] == len(ledger(tmp_path / "ws", "quadratic-demo"))
    assert not (root / "controller.json").exists()


def test_grid_runs_exactly_the_planned_grid(tmp_path: Path) -> None:
    parameters = {
        "x": {"type": "float", "low": 0.0, "high": 0.6, "grid_points": 3},
        "y": {"type": "categorical", "choices": [-0.1, 0.5]},
    }
    manifest = write_manifest(
        tmp_path / "m.yaml", manifest_data(algorithm="grid", max_trials=50, parameters=parameters)
    )
    planned = [t["params"] for t in plan_json(manifest, tmp_path / "ws")["trials"]]
    code, result = run(manifest, tmp_path / "ws")
    assert code == 0, result
    assert result["status"]["stop_reason"] == "grid_exhausted"
    assert [e["params"] for e in events(tmp_path / "ws", "trial_started")] == planned
    assert len(planned) == 6
    assert result["status"]["best"]["params"] == {"x": 0.3, "y": -0.1}


def test_maximize_keeps_the_largest_value_and_the_earliest_on_ties(tmp_path: Path) -> None:
    parameters = {
        "x": {"type": "int", "low": 1, "high": 3},
        "opt": {"type": "categorical", "choices": ["good", "also-good"]},
    }
    argv = ["{python}", "-c", FAIL_ON_BAD, "{params_json}"]
    data = manifest_data(algorithm="grid", max_trials=10, parameters=parameters, argv=argv)
    data["search"]["objective"]["direction"] = "maximize"
    code, result = run(write_manifest(tmp_path / "m.yaml", data), tmp_path / "ws")
    assert code == 0, result
    best = result["status"]["best"]
    # Grid order is (opt, x) with x fastest: trial 2 is the first with x == 3.
    assert (best["index"], best["value"], best["direction"]) == (2, 3.0, "maximize")


def test_failed_trials_count_against_the_budget(tmp_path: Path) -> None:
    parameters = {
        "x": {"type": "float", "low": 0.0, "high": 1.0},
        "opt": {"type": "categorical", "choices": ["good", "bad"]},
    }
    argv = ["{python}", "-c", FAIL_ON_BAD, "{params_json}"]
    manifest = write_manifest(
        tmp_path / "m.yaml", manifest_data(seed=1, max_trials=6, parameters=parameters, argv=argv)
    )
    bad = sum(t["params"]["opt"] == "bad" for t in plan_json(manifest, tmp_path / "ws")["trials"])
    assert 0 < bad < 6  # the seed gives a mix; the test relies on it
    code, result = run(manifest, tmp_path / "ws")
    assert code == 0
    report = result["status"]
    assert (report["trials_done"], report["trials_failed"]) == (6, bad)
    failed = [e for e in events(tmp_path / "ws", "trial_finished") if e["status"] == "failed"]
    assert {(e["reason"], e["returncode"], e["detail"]) for e in failed} == {
        ("exit_code", 3, "exit code 3")
    }


def test_an_experiment_where_every_trial_fails_is_failed(tmp_path: Path) -> None:
    argv = ["{python}", "-c", "raise SystemExit(1)"]
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=3, argv=argv))
    code, result = run(manifest, tmp_path / "ws")
    assert code == 1
    assert result["status"]["state"] == "failed"
    assert result["status"]["trials_failed"] == 3
    assert result["status"]["best"] is None
    assert "no trial succeeded" in result["message"]


def test_a_missing_metric_or_program_fails_the_trial(tmp_path: Path) -> None:
    argv = ["{python}", "-c", "open('metrics.json', 'w').write('{\"acc\": 1}')"]
    manifest = write_manifest(tmp_path / "a.yaml", manifest_data(max_trials=1, argv=argv))
    run(manifest, tmp_path / "ws")
    (finished,) = events(tmp_path / "ws", "trial_finished")
    assert finished["reason"] == "bad_metrics"
    assert "no finite number 'loss'" in finished["detail"]

    argv = [str(tmp_path / "no-such-program")]
    manifest = write_manifest(
        tmp_path / "b.yaml", manifest_data(experiment_id="b", max_trials=1, argv=argv)
    )
    run(manifest, tmp_path / "ws")
    (finished,) = events(tmp_path / "ws", "trial_finished", "b")
    assert finished["reason"] == "launch_error"


def test_trial_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # The trial starts a grandchild in its group and records its pid, then hangs.
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open('child.pid', 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    argv = ["{python}", "-c", code]
    # Long enough for a loaded machine to start the trial and write child.pid before it is
    # killed; how short the timeout is does not matter here.
    manifest = write_manifest(
        tmp_path / "m.yaml", manifest_data(max_trials=2, trial_timeout_s=3, argv=argv)
    )
    exit_code, result = run(manifest, tmp_path / "ws")
    assert exit_code == 1
    assert result["status"]["trials_failed"] == 2
    finished = events(tmp_path / "ws", "trial_finished")
    assert [e["reason"] for e in finished] == ["trial_timeout", "trial_timeout"]
    assert all(e["duration_s"] < 8 for e in finished)
    for index in (0, 1):
        child = int((tmp_path / "ws" / "exp" / f"trial-{index:05d}" / "child.pid").read_text())
        wait_for(lambda child=child: not Path(f"/proc/{child}").exists(), timeout=5)


def test_total_timeout_stops_the_experiment(tmp_path: Path) -> None:
    # The first trial succeeds at once; the second cannot finish inside the budget, so it is
    # the one cut short (short trials could end just before the deadline: a race, not a test).
    # The budget leaves a loaded machine seconds to start and finish trial 0.
    script = (
        "import json, sys, time\n"
        "if not sys.argv[1].endswith('-00000'): time.sleep(30)\n"
        "json.dump(dict(loss=1.0), open('metrics.json', 'w'))\n"
    )
    argv = ["{python}", "-c", script, "{trial_dir}"]
    manifest = write_manifest(
        tmp_path / "m.yaml", manifest_data(max_trials=50, argv=argv, total_timeout_s=4)
    )
    code, result = run(manifest, tmp_path / "ws")
    report = result["status"]
    assert code == 0, result
    assert report["stop_reason"] == "total_timeout"
    assert report["trials_done"] == 2
    assert report["trials_succeeded"] == 1
    assert 4 <= report["elapsed_s"] < 7
    # The trial cut short by the total timeout counts as a failed trial.
    assert events(tmp_path / "ws", "trial_finished")[-1]["reason"] == "total_timeout"


def test_trials_get_a_minimal_environment_and_values_are_never_stored(tmp_path: Path) -> None:
    code = (
        "import json, os\n"
        "print(' '.join(sorted(os.environ)))\n"
        "json.dump(dict(loss=1.0), open('metrics.json', 'w'))\n"
    )
    argv = ["{python}", "-c", code]
    manifest = write_manifest(
        tmp_path / "m.yaml", manifest_data(max_trials=1, argv=argv, pass_env=["SECRET_TOKEN"])
    )
    result = engine(
        "run", "--manifest", manifest, "--workspace", tmp_path / "ws", "--approve",
        SECRET_TOKEN="s3cr3t-value", NOT_PASSED="x",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    names = set((tmp_path / "ws" / "exp" / "trial-00000" / "stdout.log").read_text().split())
    allowed = {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE", "SECRET_TOKEN"}
    assert names <= allowed | {"PYTHONPATH", "LC_CTYPE"}
    assert {"PATH", "SECRET_TOKEN"} <= names
    for content in snapshot(tmp_path / "ws").values():
        assert content is None or b"s3cr3t-value" not in content


def test_a_second_controller_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=1, sleep=30))
    first = start_engine("run", "--manifest", manifest, "--workspace", tmp_path / "ws", "--approve")
    try:
        wait_for(lambda: trial_started(tmp_path / "ws", 0))
        second = engine(
            "resume", "--manifest", manifest, "--workspace", tmp_path / "ws", "--approve"
        )
        assert second.returncode == 1
        assert "only one controller per experiment" in second.stderr
        assert status(tmp_path / "ws")["state"] == "running"
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert first.returncode == 143


def test_cancel_stops_a_running_controller_and_blocks_resume(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=3, sleep=30))
    workspace = tmp_path / "ws"
    controller = start_engine("run", "--manifest", manifest, "--workspace", workspace, "--approve")
    wait_for(lambda: trial_started(workspace, 0))
    cancel = engine("cancel", "--experiment-id", "exp", "--workspace", workspace, "--approve")
    assert cancel.returncode == 0, cancel.stderr
    assert f"controller pid {controller.pid}" in cancel.stdout
    controller.communicate(timeout=30)
    assert controller.returncode == 1
    report = status(workspace)
    assert report["state"] == "cancelled"
    assert report["cancel_requested"] is True
    kinds = [e["event"] for e in ledger(workspace)][-3:]
    assert kinds == ["trial_interrupted", "experiment_cancelled", "session_ended"]
    before = snapshot(workspace)
    resume = engine("resume", "--manifest", manifest, "--workspace", workspace, "--approve")
    assert resume.returncode == 1
    assert "was cancelled" in resume.stderr
    assert snapshot(workspace) == before


def test_cancel_of_an_interrupted_experiment_is_recorded_directly(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=3, sleep=30))
    workspace = tmp_path / "ws"
    controller = start_engine("run", "--manifest", manifest, "--workspace", workspace, "--approve")
    wait_for(lambda: trial_started(workspace, 0))
    controller.send_signal(signal.SIGINT)
    controller.communicate(timeout=30)
    assert controller.returncode == 130
    assert status(workspace)["state"] == "interrupted"
    cancel = engine("cancel", "--experiment-id", "exp", "--workspace", workspace, "--approve")
    assert cancel.returncode == 0, cancel.stderr
    assert ledger(workspace)[-1]["event"] == "experiment_cancelled"
    assert ledger(workspace)[-1]["source"] == "cancel_command"
    assert status(workspace)["state"] == "cancelled"
    again = engine("cancel", "--experiment-id", "exp", "--workspace", workspace, "--approve")
    assert again.returncode == 0
    assert "already cancelled" in again.stdout


@pytest.fixture
def interrupted(tmp_path: Path) -> tuple[Path, Path]:
    """An experiment stopped by SIGTERM after one finished trial: (workspace, manifest)."""
    # Trial 1 is held so the signal surely lands while it runs; a resume runs to the end.
    hold = tmp_path / "hold"
    data = manifest_data(max_trials=3, sleep=0.2)
    data["workload"]["argv"] = holdable(data["workload"]["argv"], hold)
    manifest = write_manifest(tmp_path / "m.yaml", data)
    workspace = tmp_path / "ws"
    with holding(hold, 1):
        controller = start_engine(
            "run", "--manifest", manifest, "--workspace", workspace, "--approve"
        )
        wait_for(lambda: trial_started(workspace, 1))
        controller.send_signal(signal.SIGTERM)
        controller.communicate(timeout=30)
    assert controller.returncode == 143
    return workspace, manifest


def test_a_torn_last_ledger_line_is_reported_and_refused(interrupted: tuple[Path, Path]) -> None:
    workspace, manifest = interrupted
    path = workspace / "exp" / "ledger.jsonl"
    intact = path.stat().st_size
    lines = len(path.read_bytes().splitlines())
    with path.open("ab") as handle:
        handle.write(b'{"seq": 99, "event": "trial_fin')
    before = snapshot(workspace)
    resume = engine("resume", "--manifest", manifest, "--workspace", workspace, "--approve")
    assert resume.returncode == 1
    assert f"line {lines + 1} is torn" in resume.stderr
    assert f"truncate -s {intact}" in resume.stderr
    assert engine("status", "--experiment-id", "exp", "--workspace", workspace).returncode == 1
    assert snapshot(workspace) == before
    # The documented repair: cut the torn bytes, then resume finishes the experiment.
    os.truncate(path, intact)
    resume = engine("resume", "--manifest", manifest, "--workspace", workspace, "--approve")
    assert resume.returncode == 0, resume.stderr
    assert status(workspace)["trials_done"] == 3


def test_a_corrupt_ledger_line_or_state_file_is_refused(interrupted: tuple[Path, Path]) -> None:
    workspace, manifest = interrupted
    pristine = snapshot(workspace)
    state, path = workspace / "exp" / "state.json", workspace / "exp" / "ledger.jsonl"
    lines = path.read_bytes().split(b"\n")
    changed_event = b"\n".join([lines[0], lines[1].replace(b'"index":0', b'"index":7'), *lines[2:]])
    corruptions = [
        (state, state.read_bytes().replace(b'"sessions": 1', b'"sessions": 2'), "disagrees"),
        (state, b'{"schema_version": 1', "state.json is unreadable"),
        (path, changed_event, "ledger event 2 (trial_started) does not fit the history"),
        (path, b"not json\n" + path.read_bytes(), "line 1 is not a valid event"),
    ]
    for target, content, message in corruptions:
        original = target.read_bytes()
        target.write_bytes(content)
        resume = engine("resume", "--manifest", manifest, "--workspace", workspace, "--approve")
        assert resume.returncode == 1
        assert message in resume.stderr
        target.write_bytes(original)
        assert snapshot(workspace) == pristine
    state.unlink()
    resume = engine("resume", "--manifest", manifest, "--workspace", workspace, "--approve")
    assert resume.returncode == 1
    assert "state.json is missing" in resume.stderr


def test_resume_with_a_different_manifest_is_refused(interrupted: tuple[Path, Path]) -> None:
    workspace, manifest = interrupted
    # The recorded manifest with only max_trials changed.
    data = yaml.safe_load(manifest.read_text())
    data["search"]["budget"]["max_trials"] = 5
    changed = write_manifest(workspace.parent / "n.yaml", data)
    before = snapshot(workspace)
    resume = engine("resume", "--manifest", changed, "--workspace", workspace, "--approve")
    assert resume.returncode == 1
    assert "search.budget.max_trials: recorded 3, given 5" in resume.stderr
    assert snapshot(workspace) == before
