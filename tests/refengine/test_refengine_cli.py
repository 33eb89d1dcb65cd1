"""CLI surface of the reference engine: read-only commands, approval gate, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.refengine import (
    EXAMPLE,
    engine,
    example_manifest,
    manifest_data,
    snapshot,
    status,
    write_manifest,
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A workspace holding one completed 3-trial experiment `exp`, and its manifest."""
    tmp = tmp_path_factory.mktemp("finished")
    manifest = write_manifest(tmp / "m.yaml", manifest_data(max_trials=3))
    result = engine("run", "--manifest", manifest, "--workspace", tmp / "ws", "--approve")
    assert result.returncode == 0, result.stderr
    return tmp / "ws", manifest


def test_module_and_version() -> None:
    result = engine("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == "0.1.0"


def test_plan_does_not_create_the_workspace(tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    result = engine("plan", "--manifest", EXAMPLE, "--workspace", tmp_path / "ws" / "nested")
    assert result.returncode == 0, result.stderr
    assert "trial 00007" in result.stdout
    assert "nothing was written" in result.stdout
    assert snapshot(tmp_path) == before


def test_plan_leaves_an_existing_experiment_byte_identical(finished: tuple[Path, Path]) -> None:
    workspace, manifest = finished
    before = snapshot(workspace)
    result = engine("plan", "--manifest", manifest, "--workspace", workspace, "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["run_would_refuse"] is True
    assert [t["index"] for t in plan["trials"]] == [0, 1, 2]
    assert plan["trials"][0]["argv"][-4:-2] == [
        "--out",
        str(workspace / "exp" / "trial-00000" / "metrics.json"),
    ]
    assert snapshot(workspace) == before


def test_run_without_approve_refuses_and_creates_nothing(tmp_path: Path) -> None:
    manifest = example_manifest(tmp_path)
    before = snapshot(tmp_path)
    result = engine("run", "--manifest", manifest, "--workspace", tmp_path / "ws")
    assert result.returncode == 1
    assert "--approve" in result.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["resume", "cancel"])
def test_mutations_without_approve_refuse_and_write_nothing(
    finished: tuple[Path, Path], command: str
) -> None:
    workspace, manifest = finished
    target = ["--manifest", manifest] if command == "resume" else ["--experiment-id", "exp"]
    before = snapshot(workspace)
    result = engine(command, *target, "--workspace", workspace, "--json")
    assert result.returncode == 1
    assert "--approve" in json.loads(result.stdout)["error"]
    assert snapshot(workspace) == before


def test_run_refuses_when_the_experiment_already_has_state(finished: tuple[Path, Path]) -> None:
    workspace, manifest = finished
    before = snapshot(workspace)
    result = engine("run", "--manifest", manifest, "--workspace", workspace, "--approve")
    assert result.returncode == 1
    assert "use `resume`" in result.stderr
    assert snapshot(workspace) == before


def test_resume_and_cancel_of_a_completed_experiment_refuse(finished: tuple[Path, Path]) -> None:
    workspace, manifest = finished
    before = snapshot(workspace)
    resume = engine("resume", "--manifest", manifest, "--workspace", workspace, "--approve")
    assert resume.returncode == 1
    assert "already completed" in resume.stderr
    cancel = engine("cancel", "--experiment-id", "exp", "--workspace", workspace, "--approve")
    assert cancel.returncode == 1
    assert "already completed" in cancel.stderr
    assert snapshot(workspace) == before


def test_status_and_logs_of_a_completed_experiment(finished: tuple[Path, Path]) -> None:
    workspace, _ = finished
    before = snapshot(workspace)
    report = status(workspace)
    assert report["state"] == "completed"
    assert report["stop_reason"] == "max_trials"
    assert (report["trials_done"], report["trials_succeeded"], report["trials_failed"]) == (3, 3, 0)
    best = json.loads((workspace / "exp" / "best.json").read_text())
    assert report["best"] == best
    assert best["metric"] == "loss" and best["direction"] == "minimize"

    human = engine("status", "--experiment-id", "exp", "--workspace", workspace)
    assert "completed (max_trials)" in human.stdout
    logs = engine("logs", "--experiment-id", "exp", "--workspace", workspace, "--json")
    kinds = [e["event"] for e in json.loads(logs.stdout)["events"]]
    assert kinds[0] == "session_started"
    assert kinds[-2:] == ["experiment_finished", "session_ended"]
    assert kinds.count("trial_finished") == 3
    trial = engine("logs", "--experiment-id", "exp", "--workspace", workspace, "--trial", 1)
    assert trial.returncode == 0
    assert "loss " in trial.stdout
    assert snapshot(workspace) == before


def test_read_commands_report_missing_and_invalid_experiments(tmp_path: Path) -> None:
    missing = engine("status", "--experiment-id", "nope", "--workspace", tmp_path)
    assert missing.returncode == 1
    assert "no experiment 'nope'" in missing.stderr
    invalid = engine("logs", "--experiment-id", "../etc", "--workspace", tmp_path)
    assert invalid.returncode == 2
    resume = engine("resume", "--manifest", EXAMPLE, "--workspace", tmp_path, "--approve")
    assert resume.returncode == 1
    assert "holds no experiment" in resume.stderr
    unknown_flag = engine("status", "--experiment-id", "x", "--workspace", tmp_path, "--bogus")
    assert unknown_flag.returncode == 2
    assert list(tmp_path.iterdir()) == []


def test_logs_of_a_trial_that_never_started_refuse(finished: tuple[Path, Path]) -> None:
    workspace, _ = finished
    result = engine("logs", "--experiment-id", "exp", "--workspace", workspace, "--trial", 99)
    assert result.returncode == 1
    assert "has not started" in result.stderr
