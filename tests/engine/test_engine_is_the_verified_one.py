"""The engine that runs is the verified environment's own, and a
manifest the engine rejects is refused before anything is created.

Real venvs, real `cp -a`, real uv installs and the real command line; no mocks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from support.cli import profile_args, run_cli
from support.engines import engine_marker
from support.experiments import (
    Experiment,
    launch_detached,
    manifest_data,
    write_manifest,
)
from support.trees import env_snapshot, tree_digest

from mcp_server.experiments.engine import engine_command
from mcp_server.experiments.manifest import MAX_MANIFEST_BYTES
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

pytestmark = pytest.mark.slow

ENGINE_CLI = "automl-refengine"


# --------------------------------------------------------------------------------------------
# Class 5: a copied environment


def _install_dev_next_with_version(source_repo: SourceRepository, env: Path, version: str) -> None:
    """Put a `dev/next` build into `env` whose `--version` tells it apart from `main`."""
    init = f"{source_repo.subdirectory}/src/automl_refengine/__init__.py"
    source_repo.commit_engine(
        "dev/next",
        base="main",
        marker="dev-next-1",
        files={init: f'"""Reference engine, a test build."""\n\n__version__ = "{version}"\n'},
        force=True,
    )
    result = run_cli("install", "--branch", "dev/next", "--python", str(env),
                     *profile_args(source_repo))  # fmt: skip
    assert result.code == 0, result.output


def test_a_copied_environment_is_a_mismatch_and_its_own_interpreter_runs_its_own_engine(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path
) -> None:
    # An experiment bound to the `main` build, finished (so the original may take a new build).
    exp = Experiment(
        write_manifest(tmp_path / "m.yaml", max_trials=1, sleep=0.0), tmp_path / "ws", installed_env
    )
    launched = exp.cli("launch")
    assert launched.code == 0, launched.output

    copy = tmp_path / "env-copy"
    subprocess.run(["cp", "-a", str(installed_env), str(copy)], check=True)
    _install_dev_next_with_version(source_repo, installed_env, "9.9.9-original")
    assert engine_marker(installed_env) == "dev-next-1"
    assert engine_marker(copy) == "main-1"  # the copy's own files are still the main build

    # The copy's console script still names the original's interpreter: through it, the
    # original's (new) engine runs. That is the hazard.
    via_script = subprocess.run([str(copy / "bin" / ENGINE_CLI), "--version"],
                                capture_output=True, text=True, check=True)  # fmt: skip
    assert via_script.stdout.strip() == "9.9.9-original"
    # (b) the command automl-setup starts runs the copy's own interpreter and files.
    argv = engine_command(
        copy / "bin" / "python", REFERENCE_DISTRIBUTION, ENGINE_CLI, ["--version"]
    )
    own = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert own.stdout.strip() == "0.1.0", own.stdout + own.stderr

    # (a) verification notices the foreign shebang.
    verify = run_cli("verify", "--python", str(copy), "--json", *profile_args(source_repo))
    report = json.loads(verify.stdout)
    assert verify.code == 1 and report["status"] == "mismatch", verify.output
    (diff,) = [d for d in report["differences"] if d["field"] == f"script {ENGINE_CLI}"]
    assert diff["recorded"] == str(copy / "bin" / "python")
    assert diff["found"].startswith(str(installed_env / "bin" / "python")), diff

    # Resume from the copy refuses and changes nothing.
    before_ws, before_copy = tree_digest(exp.workspace, skip=_attempts), env_snapshot(copy)
    resumed = Experiment(exp.manifest, exp.workspace, copy).cli("resume")
    assert resumed.code == 1, resumed.output
    assert "fails verification (mismatch)" in resumed.stderr
    assert f"script {ENGINE_CLI}" in resumed.stderr
    assert tree_digest(exp.workspace, skip=_attempts) == before_ws
    assert env_snapshot(copy) == before_copy
    assert exp.attempts()[-1]["outcome"] == "refused"


def _attempts(rel: Path) -> bool:
    return rel.name == "attempts.jsonl"


def test_a_venv_whose_base_interpreter_home_is_gone_is_reported(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path
) -> None:
    cfg = installed_env / "pyvenv.cfg"
    text = cfg.read_text()
    lines = [line for line in text.splitlines() if not line.startswith("home")]
    cfg.write_text("\n".join([*lines, f"home = {tmp_path / 'gone' / 'bin'}"]) + "\n")
    verify = run_cli("verify", "--python", str(installed_env), "--json", *profile_args(source_repo))
    report = json.loads(verify.stdout)
    assert verify.code == 1 and report["status"] == "mismatch", verify.output
    assert any(d["field"] == "pyvenv.cfg home" for d in report["differences"]), report


# --------------------------------------------------------------------------------------------
# Class 7: bad manifests


def _good_text(experiment_id: str) -> str:
    return yaml.safe_dump(manifest_data(experiment_id), sort_keys=False)


def _with(experiment_id: str, path: list[str], value: object) -> str:
    data = manifest_data(experiment_id)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return yaml.safe_dump(data, sort_keys=False)


def _alias_bomb(experiment_id: str) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n" + _good_text(experiment_id) + "bomb: *a8\n"


# (name, manifest text, expected exit code, a line of the refusal)
BAD_MANIFESTS: list[tuple[str, str, int, str]] = [
    ("wrong-type", _with("bad", ["search", "seed"], "five"), 2, "search.seed: Input should be"),
    ("unknown-key", _with("bad", ["search", "sead"], 5), 2, "search.sead: unknown key"),
    ("nan", _with("bad", ["search", "budget", "trial_timeout_s"], float("nan")), 2,
     "search.budget.trial_timeout_s: Input should be a finite number"),
    ("inf", _with("bad", ["search", "budget", "total_timeout_s"], float("inf")), 2,
     "search.budget.total_timeout_s: Input should be a finite number"),
    ("negative-budget", _with("bad", ["search", "budget", "max_trials"], -1), 2,
     "search.budget.max_trials: Input should be greater than or equal to 1"),
    ("duplicate-key", _good_text("bad").replace("  seed: 5\n", "  seed: 5\n  seed: 6\n"), 2,
     "duplicate key 'seed'"),
    ("alias-bomb", _alias_bomb("bad"), 2, "aliases"),
    ("20-MB", _good_text("bad") + ("#" * 1023 + "\n") * 20 * 1024, 2,
     f"larger than {MAX_MANIFEST_BYTES} bytes"),
]  # fmt: skip


def test_bad_manifests_are_refused_before_anything_is_created_and_the_id_stays_usable(
    tmp_path: Path, installed_env: Path, reaper: object
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "other.txt").write_text("the user's file\n")
    bad = tmp_path / "bad.yaml"
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    specials = [("fifo", fifo), ("dev-zero", Path("/dev/zero")), ("directory", folder)]

    def launch(manifest: Path) -> tuple[int, str]:
        before = (tree_digest(workspace), env_snapshot(installed_env), _paths(tmp_path))
        args = ["--manifest", str(manifest), "--workspace", str(workspace)]
        result = run_cli("launch", *args, "--python", str(installed_env), "--detach", "--json")
        after = (tree_digest(workspace), env_snapshot(installed_env), _paths(tmp_path))
        assert after == before, f"{manifest}: something changed"
        assert "launched" not in result.stdout
        return result.code, result.stderr

    for name, text, code, line in BAD_MANIFESTS:
        bad.write_text(text)
        got, stderr = launch(bad)
        assert (got, line in stderr) == (code, True), (name, stderr)
        assert len(stderr) < 4000, (name, len(stderr))
        assert "unexpected failure" not in stderr
    for name, path in specials:
        got, stderr = launch(path)
        assert (got, "not a regular file" in stderr) == (2, True), (name, stderr)

    # The id is still free: a good manifest with the same id launches.
    exp = Experiment(write_manifest(tmp_path / "good.yaml", experiment_id="bad", max_trials=1,
                                    sleep=0.0), workspace, installed_env, "bad")  # fmt: skip
    pid = launch_detached(exp, reaper)  # type: ignore[arg-type]
    assert reaper.reap(pid) == 0  # type: ignore[attr-defined]
    assert exp.binding.exists()
    assert (workspace / "other.txt").read_text() == "the user's file\n"


def _paths(root: Path) -> list[str]:
    """Every path under root, directories included."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts)


@pytest.mark.shares_installed_env
def test_the_manifest_is_validated_by_the_engine_plan_with_its_own_words(
    tmp_path: Path, installed_env: Path
) -> None:
    """A rejection only the engine knows about (its own rule, not YAML) reaches the user with
    the engine's words; the sidecar, binding and registry are never created."""
    bad = tmp_path / "grid.yaml"
    bad.write_text(_with("grid", ["search", "algorithm"], "grid"))
    workspace = tmp_path / "ws"
    # The environment is shared with other tests, which may have registered experiments.
    registry = installed_env / ".automl-setup" / "experiments"
    registered = sorted(registry.iterdir()) if registry.exists() else []
    result = run_cli("launch", "--manifest", str(bad), "--workspace", str(workspace),
                     "--python", str(installed_env))  # fmt: skip
    assert result.code == 2, result.output
    assert "needs grid_points for algorithm grid" in result.stderr
    assert "automl-refengine plan" in result.stderr
    assert not workspace.exists()
    assert (sorted(registry.iterdir()) if registry.exists() else []) == registered
