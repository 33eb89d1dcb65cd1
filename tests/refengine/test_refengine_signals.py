"""Interrupting the reference engine with real signals, then resuming it.

An interrupted-and-resumed experiment must end exactly like an uninterrupted run of
the same seed: same trials (index and params), same count, same best.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.refengine import (
    engine,
    events,
    group_alive,
    holdable,
    holding,
    ledger,
    manifest_data,
    snapshot,
    start_engine,
    status,
    stop_group,
    trial_started,
    wait_for,
    write_manifest,
)

DEMO = {"seed": 21, "max_trials": 6, "sleep": 0.25}


def outcome(workspace: Path) -> tuple[int, dict[str, Any], list[tuple[int, Any, float]]]:
    """Trial count, best, and every finished trial's (index, params, value)."""
    report = status(workspace)
    started = [(e["index"], e["params"]) for e in events(workspace, "trial_started")]
    values = {e["index"]: e["value"] for e in events(workspace, "trial_finished")}
    trials = sorted({(i, str(p), values[i]) for i, p in started})
    return report["trials_done"], report["best"], trials


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Any, Any]:
    tmp = tmp_path_factory.mktemp("baseline")
    manifest = write_manifest(tmp / "m.yaml", manifest_data(**DEMO))
    result = engine("run", "--manifest", manifest, "--workspace", tmp / "ws", "--approve")
    assert result.returncode == 0, result.stderr
    return outcome(tmp / "ws")


def start_demo(
    tmp_path: Path, hold: Path | None = None
) -> tuple[Path, Path, subprocess.Popen[str]]:
    """The demo; with `hold`, its trials holdable (`holding`): a test holds trial 2 to
    interrupt it mid-trial, however slow the machine, and lets it go before resuming."""
    data = manifest_data(**DEMO)
    if hold is not None:
        data["workload"]["argv"] = holdable(data["workload"]["argv"], hold)
    manifest = write_manifest(tmp_path / "m.yaml", data)
    workspace = tmp_path / "ws"
    controller = start_engine("run", "--manifest", manifest, "--workspace", workspace, "--approve")
    return manifest, workspace, controller


def resume(manifest: Path, workspace: Path) -> subprocess.CompletedProcess[str]:
    return engine("resume", "--manifest", manifest, "--workspace", workspace, "--approve")


def last_trial_pgid(workspace: Path) -> int:
    return events(workspace, "trial_started")[-1]["pgid"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_mid_run_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, baseline: tuple[int, Any, Any], sig: signal.Signals, code: int
) -> None:
    hold = tmp_path / "hold"
    with holding(hold, 2):
        manifest, workspace, controller = start_demo(tmp_path, hold)
        wait_for(lambda: trial_started(workspace, 2))
        controller.send_signal(sig)
        stdout, _ = controller.communicate(timeout=30)
    assert controller.returncode == code
    assert f"interrupted by {sig.name}" in stdout
    # The running trial's group was terminated and the stop recorded, not lost.
    assert not group_alive(last_trial_pgid(workspace))
    interrupted = events(workspace, "trial_interrupted")
    assert [(e["index"], e["reason"], e["detail"]) for e in interrupted] == [
        (2, "signal", sig.name)
    ]
    assert ledger(workspace)[-1]["event"] == "session_ended"
    first = status(workspace)
    assert first["state"] == "interrupted"
    assert first["trials_done"] == 2

    result = resume(manifest, workspace)
    assert result.returncode == 0, result.stderr
    assert outcome(workspace) == baseline
    final = status(workspace)
    assert final["sessions"] == 2
    # The total clock continues across sessions instead of restarting.
    assert final["elapsed_s"] > first["elapsed_s"]
    assert (workspace / "exp" / "trial-00002.prev-1" / "params.json").exists()


def test_sigkill_mid_trial_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, baseline: tuple[int, Any, Any]
) -> None:
    hold = tmp_path / "hold"
    with holding(hold, 2):  # after the block, the orphaned trial 2 runs to its end
        manifest, workspace, controller = start_demo(tmp_path, hold)
        wait_for(lambda: trial_started(workspace, 2))
        controller.kill()
        controller.communicate(timeout=30)
    assert controller.returncode == -signal.SIGKILL
    report = status(workspace)
    assert (report["state"], report["stop_reason"]) == ("interrupted", "controller died")
    # The orphaned trial finishes on its own (0.25 s); resume waits for nothing.
    wait_for(lambda: not group_alive(last_trial_pgid(workspace)), timeout=15)

    result = resume(manifest, workspace)
    assert result.returncode == 0, result.stderr
    assert "trial 00002 was in flight" in result.stdout
    reconciled = events(workspace, "trial_interrupted")
    assert [(e["index"], e["reason"]) for e in reconciled] == [(2, "reconciled")]
    assert outcome(workspace) == baseline


def test_resume_refuses_while_an_orphaned_trial_still_runs(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=2, sleep=60))
    workspace = tmp_path / "ws"
    controller = start_engine("run", "--manifest", manifest, "--workspace", workspace, "--approve")
    wait_for(lambda: trial_started(workspace, 0))
    controller.kill()
    controller.communicate(timeout=30)
    pgid = last_trial_pgid(workspace)
    stdout = workspace / "exp" / "trial-00000" / "stdout.log"
    try:
        wait_for(lambda: stdout.read_text().startswith("params"))  # the orphan is quiet now
        before = snapshot(workspace)
        result = resume(manifest, workspace)
        assert result.returncode == 1
        assert f"still running as process group {pgid}" in result.stderr
        assert snapshot(workspace) == before
    finally:
        stop_group(pgid)
    cancel = engine("cancel", "--experiment-id", "exp", "--workspace", workspace, "--approve")
    assert cancel.returncode == 0, cancel.stderr
    assert status(workspace)["state"] == "cancelled"


@pytest.mark.slow
def test_repeated_sigkills_at_varied_moments_still_converge(
    tmp_path: Path, baseline: tuple[int, Any, Any]
) -> None:
    manifest, workspace, controller = start_demo(tmp_path)
    controller_file = workspace / "exp" / "controller.json"
    wait_for(lambda: len(ledger(workspace)) >= 1)
    for delay in (0.05, 0.4, 0.13, 0.7, 0.02, 0.3):
        time.sleep(delay)
        controller.kill()
        controller.communicate(timeout=30)
        if controller.returncode == 0:
            break
        started = events(workspace, "trial_started")
        if started and started[-1]["pgid"] is not None:
            wait_for(lambda: not group_alive(last_trial_pgid(workspace)), timeout=15)
        controller = start_engine(
            "resume", "--manifest", manifest, "--workspace", workspace, "--approve"
        )
        wait_for(lambda proc=controller: proc.poll() is not None or controller_file.exists())
    controller.communicate(timeout=60)
    while status(workspace)["state"] != "completed":
        result = resume(manifest, workspace)
        assert result.returncode == 0, result.stderr
    assert outcome(workspace) == baseline
