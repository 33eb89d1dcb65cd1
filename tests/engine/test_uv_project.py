"""The engine inside a uv-managed user project: real `uv lock`, `uv sync` and `uv run`.

automl-setup installs into the project's `.venv` after syncing; `uv run --no-sync` runs the
engine and `uv sync --inexact` keeps it; a plain `uv sync` (exact by default) removes it, and
`verify`, `diagnose`, `launch` and `resume` then say exactly that, changing nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.cli import profile_args, run_cli
from support.experiments import Experiment, assert_refused_once, freeze, manifest_data

from mcp_server.children.uv import uv_binary
from mcp_server.source.sourcerepo import SourceRepository

PYPROJECT = """\
[project]
name = "user-project"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["iniconfig"]

[tool.uv]
package = false
"""


def uv(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """uv as the user runs it, in the project directory (no inherited VIRTUAL_ENV)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")
    }
    return subprocess.run(
        [uv_binary(), *args],
        cwd=project,
        env={**env, "UV_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


def engine_installed(venv: Path) -> bool:
    return any(venv.glob("lib/python*/site-packages/automl_refengine-*.dist-info"))


@pytest.mark.slow
def test_a_sync_removes_the_engine_and_automl_setup_says_so(tmp_path: Path) -> None:
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine("main", marker="main-1")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    for step in (("lock",), ("sync",)):
        done = uv(project, *step)
        assert done.returncode == 0, done.stderr
    venv = project / ".venv"
    result = run_cli("install", "--branch", "main", "--python", str(venv), *profile_args(repo))
    assert result.code == 0, result.output

    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump(manifest_data(max_trials=1, sleep=0.0)), "utf-8")
    plan = uv(project, "run", "--no-sync", "automl-refengine", "plan", "--manifest", str(manifest),
              "--workspace", str(tmp_path / "plan-ws"))  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "1 trials planned" in plan.stdout
    exp = Experiment(manifest, tmp_path / "ws", venv)
    assert exp.cli("launch").code == 0

    kept = uv(project, "sync", "--inexact")
    assert kept.returncode == 0, kept.stderr
    assert run_cli("verify", "--python", str(venv), *profile_args(repo)).code == 0

    synced = uv(project, "sync")
    assert synced.returncode == 0, synced.stderr
    assert "automl-refengine" in synced.stderr  # uv says what it removed
    assert not engine_installed(venv)
    lock = (project / "uv.lock").read_bytes()

    verify = run_cli("verify", "--python", str(venv), *profile_args(repo))
    assert verify.code == 3, verify.output
    assert f"engine removed by a sync: {venv} is the environment of the uv project" in verify.stdout
    for remedy in ("after syncing", "`uv run --no-sync`", "`uv sync --inexact`"):
        assert remedy in verify.stdout
    diagnose = run_cli("diagnose", "--python", str(venv), *profile_args(repo))
    assert "engine removed by a sync" in diagnose.stdout, diagnose.output

    # launch and resume refuse as for any other mismatch, and change nothing.
    before = freeze(exp, venv)
    fresh = Experiment(manifest, tmp_path / "ws2", venv)
    launched = fresh.cli("launch")
    assert launched.code == 1, launched.output
    assert "fails verification (no-engine)" in launched.stderr
    assert "engine removed by a sync" in launched.stderr
    assert not fresh.workspace.exists()
    resumed = exp.cli("resume")
    assert resumed.code == 1, resumed.output
    assert "fails verification (no-engine)" in resumed.stderr
    assert "engine removed by a sync" in resumed.stderr
    assert_refused_once(exp, before, venv, reason="fails verification", fields=("verification",))
    assert (project / "uv.lock").read_bytes() == lock
