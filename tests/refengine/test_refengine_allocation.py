"""The reference engine's allocation cap (`--max-allocations`, allocation.py) outside SLURM,
and a stop signal that reaches the trial as well as the controller, as SLURM's preemption does
(every process of the job gets SIGTERM): the trial is interrupted and re-run, never failed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.refengine import (
    engine,
    events,
    manifest_data,
    snapshot,
    start_engine,
    trial_started,
    wait_for,
    write_manifest,
)


@pytest.mark.parametrize(
    ("cap", "restart", "message"),
    [
        ("2", "2", "allocations exhausted: generation 2 >= cap 2"),
        ("002", "0003", "allocations exhausted: generation 3 >= cap 002"),
        ("0", "0", "must be at least 1"),
        ("0x2", "0", "must be a decimal number"),
        ("3", "-1", "SLURM_RESTART_COUNT must be a decimal number"),
    ],
)
def test_a_malformed_or_exhausted_cap_exits_2_and_writes_nothing(
    tmp_path: Path, cap: str, restart: str, message: str
) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=1))
    workspace = tmp_path / "ws"
    proc = engine(
        "run", "--manifest", manifest, "--workspace", workspace, "--approve",
        "--max-allocations", cap, SLURM_RESTART_COUNT=restart,
    )  # fmt: skip
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert snapshot(tmp_path / "ws") == {}


def test_the_cap_comes_from_the_environment_unchanged(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=1))
    args = ("run", "--manifest", manifest, "--workspace", tmp_path / "ws", "--approve")
    refused = engine(*args, AUTOML_CONTROLLER_MAX_ALLOCATIONS="01", SLURM_RESTART_COUNT="1")
    assert refused.returncode == 2 and "cap 01" in refused.stderr
    assert engine(*args, AUTOML_CONTROLLER_MAX_ALLOCATIONS="01").returncode == 0


def test_a_trial_killed_by_the_controllers_stop_signal_is_interrupted_not_failed(
    tmp_path: Path,
) -> None:
    """Bug: the trial died of the job-wide SIGTERM before its supervisor stopped it, and was
    recorded as a failed (finished) trial, so the resumed run skipped it."""
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=2, sleep=30))
    workspace = tmp_path / "ws"
    proc = start_engine("run", "--manifest", manifest, "--workspace", workspace, "--approve")
    wait_for(lambda: trial_started(workspace, 0))
    (trial,) = events(workspace, "trial_started")
    os.kill(proc.pid, signal.SIGTERM)  # the controller and its trial together, like SLURM
    os.killpg(trial["pgid"], signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert events(workspace, "trial_finished") == []
    (interrupted,) = events(workspace, "trial_interrupted")
    assert interrupted["index"] == 0
