"""Experiments under faults: a binding that is not this experiment's, moved or copied
workspaces, parallel launches into one environment, `status` of a killed engine and over-long
ids. Real venvs, real uv installs, real engine processes; every refusal is checked twice (the
message and exit code, and that nothing changed)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import profile_args, run_cli
from support.engines import engine_marker
from support.experiments import (
    EXP,
    Experiment,
    Reaper,
    assert_refused_once,
    freeze,
    launch_detached,
    make_interrupted,
    wait_for,
    write_manifest,
)
from support.refengine import holding
from support.trees import env_snapshot

from mcp_server import values
from mcp_server.errors import InvalidInput, SetupError
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.engine import engine_status
from mcp_server.experiments.files import ExperimentFiles, lock_is_held
from mcp_server.source.sourcerepo import SourceRepository

ROUNDS = 8


def install_dev(source_repo: SourceRepository, env: Path) -> list[str]:
    return ["install", "--branch", "dev/next", "--python", str(env), *profile_args(source_repo)]


def foreground(tmp_path: Path, env: Path, workspace: Path, experiment_id: str) -> Experiment:
    manifest = write_manifest(
        tmp_path / f"{experiment_id}.yaml", experiment_id=experiment_id, max_trials=1, sleep=0.0
    )
    exp = Experiment(manifest, workspace, env, experiment_id)
    result = exp.cli("launch")
    assert result.code == 0, result.output
    return exp


# --------------------------------------------------------------------------------------------
# 4. A binding that is not this experiment's


@pytest.mark.slow
def test_a_binding_copied_from_another_experiment_is_refused_everywhere(
    tmp_path: Path, installed_env: Path
) -> None:
    ws = tmp_path / "ws"
    a = foreground(tmp_path, installed_env, ws, "a")
    b = foreground(tmp_path, installed_env, ws, "b")
    shutil.copyfile(b.binding, a.binding)
    before = freeze(a, installed_env)

    # With B's manifest too, everything but the id matches: B would run under A's lock and ledger.
    resumed = a.cli("resume", manifest=b.manifest)

    assert resumed.code == 1, resumed.output
    assert f"the binding {a.binding} belongs to experiment 'b', not a" in resumed.stderr
    assert_refused_once(a, before, installed_env, reason="belongs to experiment 'b'")

    before = freeze(a, installed_env)
    status = run_cli("status", "--experiment-id", "a", "--workspace", str(ws), "--json")
    assert status.code == 1, status.output
    assert "belongs to experiment 'b'" in json.loads(status.stdout)["error"]["cause"]
    listing = run_cli("experiments", "--workspace", str(ws), "--json")
    assert listing.code == 1, listing.output  # an unreadable experiment is not hidden
    rows = json.loads(listing.stdout)
    assert [r["experiment_id"] for r in rows["experiments"]] == ["b"]
    assert [u.split(":")[0] for u in rows["unreadable"]] == ["a"]
    assert freeze(a, installed_env) == before  # status and listing wrote nothing

    # The MCP provenance check and the install guard read the binding the same way.
    from mcp_server.experiments.registered import unfinished_experiments
    from mcp_server.operations import verify
    from mcp_server.requests import ProvenanceQuery
    from mcp_server.source.profile import load_profile

    query = ProvenanceQuery(
        profile=load_profile(), python=str(installed_env), experiment_id="a", workspace=str(ws)
    )
    with pytest.raises(SetupError, match="belongs to experiment 'b'"):
        verify(query)
    assert [e.experiment_id for e in unfinished_experiments(installed_env / ".automl-setup")] == [
        "a"
    ]  # doubt keeps it bound; b completed


@pytest.mark.slow
def test_a_binding_whose_digest_or_fields_were_edited_is_refused(
    tmp_path: Path, installed_env: Path
) -> None:
    exp = foreground(tmp_path, installed_env, tmp_path / "ws", EXP)
    files = ExperimentFiles(exp.workspace, EXP)
    original = json.loads(exp.binding.read_bytes())

    edited = json.loads(json.dumps(original))
    edited["engine"]["source"]["commit"] = "0" * 40  # still valid JSON, still a commit
    exp.binding.write_text(json.dumps(edited))
    with pytest.raises(
        SetupError, match=r"identity digest of the binding .* does not recompute"
    ) as info:
        read_binding(files)
    assert "bindings are never rewritten" in info.value.remedy

    missing = dict(original)
    del missing["manifest_sha256"]
    exp.binding.write_text(json.dumps(missing))
    with pytest.raises(SetupError, match=r"missing field\(s\) manifest_sha256"):
        read_binding(files)

    exp.binding.write_text(json.dumps({**original, "extra": 1}))
    with pytest.raises(SetupError, match="not a valid binding"):
        read_binding(files)


@pytest.mark.slow
def test_a_schema_invalid_attempts_line_is_a_clear_refusal(
    tmp_path: Path, installed_env: Path
) -> None:
    exp = foreground(tmp_path, installed_env, tmp_path / "ws", EXP)
    lines = exp.attempts_path.read_bytes().splitlines()
    bad = json.loads(lines[0])
    bad["outcome"] = "maybe"
    exp.attempts_path.write_bytes(b"\n".join([json.dumps(bad).encode(), *lines[1:]]) + b"\n")
    before = freeze(exp, installed_env)

    result = run_cli("status", "--experiment-id", EXP, "--workspace", str(exp.workspace))

    assert result.code == 1, result.output
    assert f"{exp.attempts_path} line 1 is not a valid attempts ledger line" in result.stderr
    assert "unexpected failure" not in result.output
    assert freeze(exp, installed_env) == before


@pytest.mark.slow
def test_an_unreadable_registry_entry_keeps_the_environment_bound_with_a_reason(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    entry = installed_env / ".automl-setup" / "experiments" / "x--0123456789ab.json"
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(json.dumps({"schema_version": 1, "experiment_id": "x", "workspace": "/n"}))
    env_before = env_snapshot(installed_env)

    refused = run_cli(*install_dev(source_repo, installed_env))

    assert refused.code == 1, refused.output
    assert "unfinished experiments are bound to the engine in" in refused.stderr
    assert f"(registry entry unreadable: {entry} is not a valid registry entry" in refused.stderr
    assert "missing field(s) identity_digest" in refused.stderr
    assert env_snapshot(installed_env) == env_before
    assert engine_marker(installed_env) == "main-1"


# --------------------------------------------------------------------------------------------
# 6. Moved or copied workspace


@pytest.mark.slow
def test_a_moved_workspace_reports_resumes_and_registers_where_it_is_now(
    tmp_path: Path, installed_env: Path, source_repo: SourceRepository, reaper: Reaper
) -> None:
    old = make_interrupted(tmp_path, installed_env, reaper, max_trials=5, sleep=0.2)
    assert old.hold is not None  # outside the workspace: it stays where it is
    trials = old.trials_done()
    moved = Experiment(old.manifest, tmp_path / "ws2", installed_env)
    old.workspace.rename(moved.workspace)

    status = moved.status()
    assert status["state"] == "interrupted" and status["trials_done"] == trials
    assert status["workspace"] == str(moved.workspace)
    assert any(f"moved or copied from {old.workspace}" in n for n in status["notes"])
    listing = run_cli("experiments", "--workspace", str(moved.workspace), "--json")
    (row,) = json.loads(listing.stdout)["experiments"]
    assert row["state"] == "interrupted" and row["notes"] == status["notes"]

    # The resumed engine's first trial waits until the install was refused: an experiment that
    # completed first would let dev/next into the shared environment.
    with holding(old.hold, trials):
        result = moved.cli("resume", "--detach", "--json")

        assert result.code == 0, result.output
        pid = reaper.adopt(json.loads(result.stdout)["pid"])
        accepted = moved.attempts()[-1]
        assert accepted["action"] == "resume" and accepted["outcome"] == "accepted"
        # The engine runs in the workspace it is in now, and the install guard sees it there.
        argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        assert str(moved.workspace).encode() in argv and str(old.workspace).encode() not in argv
        refused = run_cli(*install_dev(source_repo, installed_env))
        assert refused.code == 1, refused.output
        assert f"{EXP} ({moved.workspace})" in refused.stderr
    assert reaper.reap(pid, timeout=120) == 0
    assert not old.workspace.exists()
    assert moved.status()["state"] == "completed"


@pytest.mark.slow
def test_a_copied_workspace_reads_its_own_files_and_refuses_to_resume(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    original = make_interrupted(tmp_path, installed_env, reaper, max_trials=2, sleep=0.2)
    copy = Experiment(original.manifest, tmp_path / "ws-copy", installed_env)
    subprocess.run(["cp", "-a", str(original.workspace), str(copy.workspace)], check=True)
    trials = copy.trials_done()
    assert original.cli("resume").code == 0  # the original runs to its end
    assert original.status()["state"] == "completed"

    status = copy.status()
    assert status["state"] == "interrupted" and status["trials_done"] == trials
    (note,) = [n for n in status["notes"] if "moved or copied" in n]
    assert f"moved or copied from {original.workspace}" in note
    assert "its own controller lock" in note
    before = freeze(copy, installed_env)
    original_before = freeze(original)

    result = copy.cli("resume")

    assert result.code == 1, result.output
    assert f"{copy.workspace} is a copy of {original.workspace}" in result.stderr
    assert "two copies could run at once" in result.stderr
    assert_refused_once(copy, before, installed_env, reason="is a copy of")
    assert freeze(original) == original_before


# --------------------------------------------------------------------------------------------
# 14. Parallel launches in one environment


@pytest.mark.slow
def test_concurrent_launches_of_different_experiments_into_one_environment_all_proceed(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    ws = tmp_path / "ws"
    clean = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}

    def start(experiment_id: str) -> subprocess.Popen[str]:
        manifest = write_manifest(
            tmp_path / f"{experiment_id}.yaml", experiment_id=experiment_id, max_trials=1,
            sleep=0.0,
        )  # fmt: skip
        argv = [sys.executable, "-m", "mcp_server.faces.cli", "launch", "--manifest", str(manifest)]
        argv += ["--workspace", str(ws), "--python", str(installed_env), "--detach", "--json"]
        return subprocess.Popen(
            argv, env=clean, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    for round_ in range(ROUNDS):
        procs = [start(f"r{round_}-{side}") for side in "ab"]
        outputs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err for _out, err in outputs]
        for out, _err in outputs:
            reaper.reap(reaper.adopt(json.loads(out)["pid"]))
    listing = run_cli("experiments", "--workspace", str(ws), "--json")
    rows = json.loads(listing.stdout)["experiments"]
    assert len(rows) == 2 * ROUNDS and {r["state"] for r in rows} == {"completed"}


@pytest.mark.slow
def test_an_install_is_refused_while_a_launch_holds_the_environment(
    tmp_path: Path, installed_env: Path, source_repo: SourceRepository
) -> None:
    from mcp_server.fsutil import exclusive_lock, shared_lock

    lock = installed_env / ".automl-setup" / "lock"
    env_before = env_snapshot(installed_env)
    with shared_lock(lock, step="launch", holder=f"environment {installed_env}"):
        refused = run_cli(*install_dev(source_repo, installed_env))
    assert refused.code == 1, refused.output
    assert f"environment {installed_env} is in use" in refused.stderr
    assert "held shared by a launch or resume" in refused.stderr
    assert env_snapshot(installed_env) == env_before
    assert engine_marker(installed_env) == "main-1"

    # The other way round: an install in progress refuses a launch, which creates nothing.
    exp = Experiment(write_manifest(tmp_path / "m.yaml"), tmp_path / "ws", installed_env)
    with exclusive_lock(lock, step="install", holder=f"environment {installed_env}"):
        result = exp.cli("launch", "--detach")
    assert result.code == 1, result.output
    assert f"is in progress in environment {installed_env} (pid {os.getpid()})" in (result.stderr)
    assert not exp.workspace.exists()
    assert env_snapshot(installed_env) == env_before


# --------------------------------------------------------------------------------------------
# 16. Status of an engine that is gone; over-long ids


@pytest.mark.slow
def test_status_of_a_sigkilled_engine_is_not_running(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    hold = tmp_path / "hold"
    manifest = write_manifest(tmp_path / "m.yaml", max_trials=3, sleep=0.2, hold=hold)
    exp = Experiment(manifest, tmp_path / "ws", installed_env)
    # The first trial stays in flight until the end: the killed engine's trial is still the
    # live orphan the test reaps (not one the engine already reaped itself).
    with holding(hold, 0):
        pid = launch_detached(exp, reaper)
        wait_for("a trial in flight", lambda: bool(exp.engine_events("trial_started")))
        orphan = exp.engine_events("trial_started")[-1]["pgid"]
        os.kill(pid, signal.SIGKILL)
        files = ExperimentFiles(exp.workspace, EXP)
        wait_for("the controller lock to be free", lambda: not lock_is_held(files))
        # Not reaped yet: its pid still answers kill(pid, 0), so the engine's own status says
        # "running" (as it would after the pid was reused) -- but its lock is free.
        engine_says, _problem = engine_status(
            read_binding(files), exp.workspace, str(installed_env)
        )
        assert engine_says is not None and engine_says["state"] == "running"

        status = exp.status()

        assert status["state"] == "interrupted" and status["controller_running"] is False
        (note,) = [n for n in status["notes"] if "engine reports running" in n]
        assert f"automl-setup resume --experiment-id {EXP}" in note
        assert reaper.reap(pid) == -signal.SIGKILL
    reaper.reap(reaper.adopt(orphan))


def test_an_over_long_experiment_id_is_not_echoed_in_full(tmp_path: Path) -> None:
    long_id = "x" * 5000
    result = run_cli("status", "--experiment-id", long_id, "--workspace", str(tmp_path))
    assert result.code == 2, result.output
    assert long_id not in result.output and "x" * 40 + "…" in result.stderr
    assert len(result.output) < 1000
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "validate",
    [
        values.CommitId,
        values.ExtraName,
        values.BranchName,
        values.Subdirectory,
        lambda value: values.RepositoryUrl("ext::" + value),
    ],
    ids=["commit", "extra", "branch", "subdirectory", "repository"],
)
def test_no_validator_echoes_an_over_long_value_in_full(validate: Callable[[str], str]) -> None:
    hostile = "-" + "y" * 5000
    with pytest.raises(InvalidInput) as info:
        validate(hostile)
    text = info.value.full_text()
    assert "y" * 200 not in text
    assert len(text) < 600, text
