"""Experiments bound to an exact engine build: launch, its refusals, the install guard, status,
the attempts ledger and the engine's read-only plan.

Everything is real: a git repository built from the reference engine, `uv` installs into real
virtual environments, the `automl-setup` command line as a process, the engine as a process,
real signals. The helpers (tests/support/experiments.py) are shared with `test_resume.py`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from support.cli import profile_args, run_cli
from support.engines import engine_marker
from support.experiments import (
    ENGINE_CLI,
    EXP,
    Experiment,
    assert_refused_once,
    assert_unchanged,
    engine_plan,
    freeze,
    installed_file,
    plain_engine_env,
    write_manifest,
)
from support.trees import env_snapshot, tree_digest

from mcp_server import target_side
from mcp_server.environment.wheelstore import WheelStore
from mcp_server.source.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    SourceRepository,
)

# --------------------------------------------------------------------------------------------
# Manifests, files and polling


# --------------------------------------------------------------------------------------------
# Processes: the detached engine is reparented to the test process (a child subreaper), so
# the test can reap it and read its real exit status. (Without this, an init that never reaps
# would leave zombies that still answer kill(pid, 0) and look alive to the engine.)


# --------------------------------------------------------------------------------------------
# "Nothing changed", and exactly one refused attempt


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
    # The environment's own interpreter runs the engine's console script (never its shebang),
    # isolated and writing no bytecode into the environment.
    assert binding["argv"][:3] == [str(installed_env / "bin" / "python"), "-I", "-B"]
    assert binding["argv"][3] == str(target_side.script("launcher"))  # a file, never -c CODE
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
