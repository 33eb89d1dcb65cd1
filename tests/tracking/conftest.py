"""The tracking tests' servers and experiments: a real `mlflow server` (tests/support/tracking.py)
per module, and a reference engine installed once with experiments launched on it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import run_cli
from support.engines import install_main, new_source_repo
from support.experiments import write_manifest
from support.tracking import MlflowServer


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-auth"), auth=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class Engine:
    env: Path
    root: Path

    def launch(self, experiment_id: str, *, trials: int = 3, **extra: object) -> Path:
        """A finished experiment of `trials` trials in a workspace of its own."""
        workspace = self.root / f"ws-{experiment_id}"
        manifest = write_manifest(self.root / f"{experiment_id}.yaml", experiment_id=experiment_id,
                                  max_trials=trials, sleep=0.0, **extra)  # fmt: skip
        done = run_cli("launch", "--manifest", str(manifest), "--workspace", str(workspace),
                       "--python", str(self.env))  # fmt: skip
        assert done.code == 0, done.output
        return workspace


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("tracked")
    return Engine(install_main(root / "env", new_source_repo(root / "repo")), root)
