"""Shared fixtures: real git repositories built from the reference engine, real venvs, and the
real command line run as a subprocess."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_server.build import uv_binary
from mcp_server.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    SourceRepository,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    cwd: Path | None = None,
) -> CliResult:
    """`automl-setup ARGS` as a real process (the installed console script's module)."""
    # A VIRTUAL_ENV inherited from the developer's shell must not pick the target for a test.
    full_env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_server.cli", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def profile_args(repo: SourceRepository) -> list[str]:
    """Profile flags that point automl-setup at a local reference-engine repository."""
    return [
        "--repository",
        repo.url,
        "--subdirectory",
        repo.subdirectory,
        "--distribution",
        REFERENCE_DISTRIBUTION,
    ]


def tree_digest(root: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> dict[str, str]:
    """sha256 of every regular file under root (symlinks by target), for byte-identity checks."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or skip(rel):
            continue
        if path.is_symlink():
            out[str(rel)] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def make_venv(path: Path) -> Path:
    """An empty venv of the running interpreter, made with uv."""
    subprocess.run(
        [uv_binary(), "venv", "--quiet", "--python", sys.executable, str(path)],
        check=True,
        capture_output=True,
    )
    return path


def env_snapshot(env_dir: Path) -> dict[str, str]:
    """Everything an install may touch in a venv: packages, scripts and the automl-setup state
    (except the lock file, whose pid text changes by design)."""
    return tree_digest(env_dir, skip=lambda rel: rel.name == "lock")


@pytest.fixture
def source_repo(tmp_path: Path) -> SourceRepository:
    """`main` and `dev/next` with distinct engine sources."""
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine("main", marker="main-1")
    repo.commit_engine("dev/next", base="main", marker="dev-next-1")
    return repo


@pytest.fixture
def installed_env(tmp_path: Path, source_repo: SourceRepository) -> Path:
    """A venv with the reference engine installed from `main` by automl-setup."""
    env_dir = tmp_path / "env"
    result = run_cli(
        "install",
        "--branch",
        "main",
        "--python",
        str(env_dir),
        "--create-env",
        *profile_args(source_repo),
    )
    assert result.code == 0, result.output
    return env_dir


def engine_marker(env_dir: Path) -> str:
    """Import the installed engine in its own interpreter and return its build marker."""
    proc = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-c",
            "import automl_refengine._build_marker as m; print(m.MARKER)",
        ],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return proc.stdout.strip()
