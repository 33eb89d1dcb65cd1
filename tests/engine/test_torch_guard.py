"""No build of torch the user did not choose: `install --extra training` into an environment
without torch is refused before anything is touched; a torch that changed during an install is
refused like any other identity field. (Keeping pip's torch through a real install, and
refusing an engine that excludes it, are in test_sft_demo.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.cli import profile_args, run_cli
from support.engines import engine_marker, make_venv
from support.trees import env_snapshot, tree_digest

from mcp_server.environment.probe import probe_interpreter
from mcp_server.environment.torch_guard import check_torch_kept
from mcp_server.errors import SetupError
from mcp_server.source.sourcerepo import SourceRepository


@pytest.mark.slow
def test_training_extra_without_torch_is_refused_and_changes_nothing(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    env = make_venv(tmp_path / "env")
    installed = run_cli(
        "install", "--branch", "main", "--python", str(env), *profile_args(source_repo)
    )
    assert installed.code == 0, installed.output
    before = env_snapshot(env), tree_digest(source_repo.root)

    result = run_cli(
        "install", "--branch", "dev/next", "--extra", "training", "--python", str(env),
        *profile_args(source_repo), env={"UV_OFFLINE": "1"},  # a regression must not download
    )  # fmt: skip

    assert result.code == 1, result.output
    assert "check torch" in result.output
    assert f"requires torch and {env} has none" in result.output
    assert "nothing was installed" in result.output
    assert f"install the torch build you want into {env} first" in result.output
    assert (env_snapshot(env), tree_digest(source_repo.root)) == before
    assert engine_marker(env) == "main-1"


def test_a_torch_changed_by_the_install_is_refused() -> None:
    pytest.importorskip("torch", reason="compares a real environment's torch")
    before = probe_interpreter(Path(sys.executable), [])
    check_torch_kept(before, before)
    versions = {**before.versions, "torch": "2.99.0"}
    for after in (
        before.model_copy(update={"versions": versions}),
        before.model_copy(update={"torch_cuda": "12.8"}),
        before.model_copy(update={"versions": {k: v for k, v in versions.items() if k != "torch"}}),
    ):
        with pytest.raises(SetupError) as refused:
            check_torch_kept(before, after)
        text = refused.value.full_text()
        assert "torch is never replaced or upgraded" in text
        assert f"torch before: {before.versions['torch']}" in text
