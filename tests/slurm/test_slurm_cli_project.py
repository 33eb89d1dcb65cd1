"""`slurm render` and `slurm gate`, the command line's own SLURM commands, take the workspace
and python the project file names when the flags are not given, as the operations do."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_cli
from support.refengine import manifest_data, write_manifest
from support.trees import tree_digest


def study(root: Path, env: Path) -> Path:
    """A project whose pyproject.toml names the workspace `runs` and the environment `env`."""
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "study"\nversion = "0"\n\n[tool.automl-setup]\n'
        f'workspace = "runs"\npython = "{env}"\n',
        encoding="utf-8",
    )
    return root


@pytest.mark.shares_installed_env
def test_render_takes_the_workspace_and_python_of_the_project_file(
    installed_env: Path, tmp_path: Path
) -> None:
    project = study(tmp_path / "study", installed_env)
    manifest = write_manifest(project / "m.yaml", manifest_data(max_trials=2))
    before = tree_digest(project)
    result = run_cli("slurm", "render", "--manifest", str(manifest), cwd=project)
    assert result.code == 0, result.output
    assert f"WORKSPACE={project / 'runs'}\n" in result.stdout
    assert f"ENGINE_ENV={installed_env}\n" in result.stdout
    assert tree_digest(project) == before  # a render binds and writes nothing


def test_gate_takes_the_workspace_of_the_project_file(tmp_path: Path) -> None:
    env = tmp_path / "env"  # never reached: the experiment is looked for first
    project = study(tmp_path / "study", env)
    bare = tmp_path / "bare"
    bare.mkdir()
    before = tree_digest(tmp_path)
    gate = ["slurm", "gate", "--experiment-id", "exp", "--python", str(env)]
    gate += ["--generation", "0", "--cap", "3"]
    result = run_cli(*gate, cwd=project)
    assert result.code == 78, result.output  # the gate's refusal, not a crash
    assert f"no experiment 'exp' launched by automl-setup in {project / 'runs'}" in result.stdout
    # No project file and no --workspace: refused as the operations refuse it.
    refused = run_cli(*gate, cwd=bare)
    assert refused.code == 2, refused.output
    assert "no --workspace given, and no project file names one" in refused.stderr
    assert tree_digest(tmp_path) == before and not (project / "runs").exists()
