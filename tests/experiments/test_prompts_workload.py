"""The `prompts` extra: the GEPA workload run through automl-setup (install --extra prompts,
launch, SIGTERM mid-trial, resume from GEPA's own state, the uninterrupted best score), and
the gepa check: a gepa changed by hand is refused with the three versions side by side, and
nothing changes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import profile_args, run_cli
from support.engines import engine_marker
from support.experiments import (
    Experiment,
    Reaper,
    launch_detached,
    make_interrupted,
    wait_for,
)
from support.trees import env_snapshot

from mcp_server.children.uv import uv_binary
from mcp_server.environment.gepa_pin import GEPA_PIN
from mcp_server.environment.identity import compute_identity_digest
from mcp_server.environment.records import BuildIdentity, EnvironmentInfo, SourceIdentity
from mcp_server.source.sourcerepo import SourceRepository, reference_engine_source
from mcp_server.source.wheelbuild import tomllib

REPO_ROOT = Path(__file__).resolve().parents[2]
ENGINE_PYPROJECT = "packages/automl-core/pyproject.toml"
EXP = "prompts"
HISTORY = ".automl-setup/history.jsonl"


# Runs the GEPA workload (argv from the 3rd on), but while the file argv[1] exists, every task
# model call made once GEPA has saved three candidates waits: the trial interrupted there
# cannot end first, however slow the machine. Without the file it is the workload unchanged.
HOLD_AT_THIRD_CANDIDATE = (
    "import json, os, sys, time\n"
    "from pathlib import Path\n"
    "from automl_refengine.workloads import prompts\n"
    "hold, saved = sys.argv[1], Path(sys.argv[2], 'gepa', 'candidates.json')\n"
    "call = prompts.TaskModel.__call__\n"
    "def at_third():\n"
    "    return saved.exists() and len(json.loads(saved.read_bytes())) >= 3\n"
    "def held(self, messages):\n"
    "    while os.path.exists(hold) and at_third():\n"
    "        time.sleep(0.02)\n"
    "    return call(self, messages)\n"
    "prompts.TaskModel.__call__ = held\n"
    "sys.exit(prompts.main(sys.argv[3:]))\n"
)


def prompts_manifest(path: Path, hold: Path) -> Path:
    """Two GEPA trials (80 and 30 metric calls of 10 ms); the first is interrupted, held at
    its third candidate while `hold` exists."""
    argv = ["{python}", "-c", HOLD_AT_THIRD_CANDIDATE, str(hold), "{trial_dir}"]
    argv += ["--params", "{params_json}"]
    argv += ["--out", "{trial_dir}/metrics.json", "--run-dir", "{trial_dir}/gepa"]
    data: dict[str, Any] = {
        "search": {
            "experiment_id": EXP,
            "algorithm": "grid",
            "seed": 0,
            "objective": {"metric": "val_score", "direction": "maximize"},
            "budget": {"max_trials": 2, "trial_timeout_s": 60.0, "total_timeout_s": 300.0},
            "parameters": {
                "max_metric_calls": {"type": "categorical", "choices": [80, 30]},
                "minibatch_size": {"type": "categorical", "choices": [4]},
            },
        },
        "workload": {"argv": [*argv, "--call-delay", "0.01"], "metrics_file": "metrics.json"},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def install(repo: SourceRepository, env: Path, branch: str, *extra: str) -> Any:
    return run_cli(
        "install", "--branch", branch, "--extra", "prompts", "--python", str(env), *extra,
        *profile_args(repo),
    )  # fmt: skip


def uv_pip_install(env: Path, requirement: str) -> None:
    """What a user does by hand: put another gepa into the environment."""
    subprocess.run(
        [uv_binary(), "pip", "install", "--quiet", "--python", str(env), requirement],
        check=True,
        capture_output=True,
    )


@pytest.fixture(name="world", scope="module")
def world_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[SourceRepository, Path]:
    """`main`, and `dev/loose` whose prompts extra lets any gepa >= 0.1 stay; `main` is
    installed with --extra prompts."""
    root = tmp_path_factory.mktemp("prompts")
    repo = SourceRepository(root / "repo")
    repo.commit_engine("main", marker="main-1")
    loose = (reference_engine_source() / "pyproject.toml").read_text(encoding="utf-8")
    assert f'prompts = ["gepa=={GEPA_PIN}"]' in loose
    loose = loose.replace(f"gepa=={GEPA_PIN}", "gepa>=0.1")
    repo.commit_engine("dev/loose", base="main", marker="loose", files={ENGINE_PYPROJECT: loose})
    env = root / "env"
    result = install(repo, env, "main", "--create-env")
    assert result.code == 0, result.output
    return repo, env


def test_the_project_and_the_engine_pin_the_same_gepa() -> None:
    """The pin is declared directly in both `prompts` extras and equals the checked one."""
    ours = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    engine = tomllib.loads((reference_engine_source() / "pyproject.toml").read_text("utf-8"))
    for project in (ours, engine):
        assert project["project"]["optional-dependencies"]["prompts"] == [f"gepa=={GEPA_PIN}"]


@pytest.mark.slow
def test_gepa_workload_resumes_from_gepa_state_to_the_uninterrupted_best(
    world: tuple[SourceRepository, Path], tmp_path: Path, reaper: Reaper
) -> None:
    repo, env = world
    verify = run_cli("verify", "--python", str(env), *profile_args(repo))
    assert verify.code == 0, verify.output
    assert f"watched: gepa {GEPA_PIN}, torch" in verify.stdout

    hold = tmp_path / "hold"
    hold.touch()
    manifest = prompts_manifest(tmp_path / "prompts.yaml", hold)
    exp = Experiment(manifest, tmp_path / "ws", env, EXP)
    pid = launch_detached(exp, reaper)
    trial = exp.engine_dir / "trial-00000"
    state = trial / "gepa" / "gepa_state.bin"
    # Interrupt once GEPA has saved its state with three candidates (two accepted proposals).
    wait_for("GEPA's third candidate", lambda: len(_candidates(trial)) >= 3)
    assert state.is_file()
    os.kill(pid, signal.SIGTERM)
    assert reaper.reap(pid) == 143
    hold.unlink()  # the resumed trial and the baseline run unheld
    assert exp.status()["state"] == "interrupted"
    assert not (trial / "metrics.json").exists()

    resumed = exp.cli("resume")
    assert resumed.code == 0, resumed.output
    log = _read(trial / "stdout.log")
    assert f"resuming GEPA from its state in {trial}.prev-1/gepa" in log
    assert "Loading gepa state from run dir" in log

    baseline = Experiment(manifest, tmp_path / "base-ws", env, EXP)
    result = baseline.cli("launch")
    assert result.code == 0, result.output
    mine, theirs = exp.status(), baseline.status()
    assert mine["state"] == theirs["state"] == "completed"
    assert mine["best"] == theirs["best"]
    assert exp.finished_trials() == baseline.finished_trials()
    assert 0 < theirs["best"]["value"] <= 1


@pytest.mark.slow
def test_a_gepa_changed_by_hand_is_refused_with_the_three_versions(
    world: tuple[SourceRepository, Path],
) -> None:
    repo, env = world
    uv_pip_install(env, "gepa==0.1.1")
    verify = run_cli("verify", "--python", str(env), *profile_args(repo))
    assert "watched: gepa 0.1.1" in verify.stdout
    assert "environment changed since install: watched.gepa 0.1.2 -> 0.1.1" in verify.stdout

    # The same build again: it would change nothing, so the wrong gepa is refused, not
    # reported "already installed and verified"; not even a history line is written.
    before = env_snapshot(env)
    same = install(repo, env, "main", "--json")
    assert same.code == 1, same.output
    error = json.loads(same.stdout)["error"]
    assert error["step"] == "check gepa"
    assert error["details"] == [
        f"automl-setup pins:    gepa=={GEPA_PIN}",
        f"the engine declares:  gepa=={GEPA_PIN}",
        "the environment has:  gepa 0.1.1",
    ]
    assert f"uv pip install --python {env} gepa=={GEPA_PIN}" in error["remedy"]
    assert env_snapshot(env) == before

    # A build whose extra lets the hand-installed gepa stay: refused after uv ran, rolled back.
    history = (env / HISTORY).read_bytes()
    loose = install(repo, env, "dev/loose")
    assert loose.code == 1, loose.output
    assert "error: check gepa: gepa in" in loose.stderr
    assert "the previous engine was restored" in loose.stderr
    for line in (
        f"automl-setup pins:    gepa=={GEPA_PIN}",
        "the engine declares:  gepa>=0.1",
        "the environment has:  gepa 0.1.1",
    ):
        assert line in loose.stderr
    after = env_snapshot(env)
    assert {k: v for k, v in after.items() if k != HISTORY} == {
        k: v for k, v in before.items() if k != HISTORY
    }
    (added,) = (env / HISTORY).read_bytes().removeprefix(history).decode().splitlines()
    assert json.loads(added)["event"] == "rolled-back"
    assert engine_marker(env) == "main-1"

    # The remedy the refusal names puts the environment back as it was installed.
    uv_pip_install(env, f"gepa=={GEPA_PIN}")
    assert install(repo, env, "main").code == 0


@pytest.mark.slow
def test_recreate_installs_the_bound_extras_and_the_resume_is_accepted(
    world: tuple[SourceRepository, Path], tmp_path: Path, reaper: Reaper
) -> None:
    """The binding records the extras its engine was installed with, and `recreate` installs
    them too: the recreated environment is the bound one, gepa included, so resume accepts it
    (without them, its dependencies differ and resume refuses)."""
    _repo, env = world
    exp = make_interrupted(tmp_path, env, reaper, max_trials=3, sleep=0.2)
    written = exp.binding.read_bytes()
    binding = json.loads(written)
    assert (binding["schema_version"], binding["engine"]["extras"]) == (3, ["prompts"])

    # A binding of format 1 (an older release) has no extras (nor a closure, which its digest
    # does not cover): the refusal says so.
    engine_v1 = {k: v for k, v in binding["engine"].items() if k not in ("extras", "closure")}
    engine_v1["identity_digest"] = compute_identity_digest(
        SourceIdentity(**engine_v1["source"]),
        BuildIdentity(**engine_v1["build"]),
        EnvironmentInfo(**engine_v1["environment"]),
    )
    exp.binding.write_text(json.dumps({**binding, "schema_version": 1, "engine": engine_v1}))
    old = run_cli(
        "recreate", "--experiment-id", exp.experiment_id, "--workspace", str(exp.workspace),
        "--python", str(tmp_path / "env-old"), "--create-env",
    )  # fmt: skip
    assert old.code == 1, old.output
    assert "the environment differs from the bound one" in old.stderr
    assert "this binding (format 1) does not record the engine's extras" in old.stderr
    exp.binding.write_bytes(written)

    target = tmp_path / "env-recreated"
    recreated = run_cli(
        "recreate", "--experiment-id", exp.experiment_id, "--workspace", str(exp.workspace),
        "--python", str(target), "--create-env",
    )  # fmt: skip
    assert recreated.code == 0, recreated.output
    record = json.loads((target / ".automl-setup" / "engine-record.json").read_bytes())
    assert record["install"]["extras"] == ["prompts"]
    assert record["environment"]["watched"]["gepa"] == GEPA_PIN
    resumed = dataclasses.replace(exp, env=target).cli("resume")
    assert resumed.code == 0, resumed.output
    assert exp.status()["state"] == "completed"


def _candidates(trial: Path) -> list[Any]:
    """GEPA's candidates.json, which it replaces atomically with its state."""
    path = trial / "gepa" / "candidates.json"
    return json.loads(path.read_bytes()) if path.exists() else []


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""
