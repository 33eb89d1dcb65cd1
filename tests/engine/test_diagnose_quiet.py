"""Quiet failures made loud, noise removed: diagnose says only what it
found, one line per fact; a verify mismatch ends with its remedy; the same commit installed
over modified files says it repaired them; an interrupted install names its distribution."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import closed_pipe_run, profile_args, run_cli
from support.engines import make_venv, new_source_repo
from support.trees import tree_digest

from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[SourceRepository, Path]:
    """One repository and one install of `main`, shared in order by the tests below (the
    tamper test leaves the modified file the reinstall test repairs)."""
    root = tmp_path_factory.mktemp("quiet")
    repo = new_source_repo(root / "repo")
    env_dir = root / "env"
    result = run_cli(
        "install", "--branch", "main", "--python", str(env_dir), "--create-env",
        *profile_args(repo),
    )  # fmt: skip
    assert result.code == 0, result.output
    return repo, env_dir


def engine_file(env_dir: Path) -> Path:
    (site,) = env_dir.glob("lib/python*/site-packages")
    return site / "automl_refengine" / "__init__.py"


def test_diagnose_of_a_verified_engine_is_quiet(setup: tuple[SourceRepository, Path]) -> None:
    repo, env_dir = setup
    result = run_cli("diagnose", "--python", str(env_dir), *profile_args(repo))
    assert result.code == 0, result.output
    assert "tao" not in result.stdout  # the look-alike is not installed: not a word about it
    assert "install the core from source" not in result.stdout
    facts = [line for line in result.stdout.splitlines() if line.startswith("  - ")]
    assert facts == ["  - the installed core matches its record (verified)"]


def test_verify_mismatch_ends_with_its_remedy(setup: tuple[SourceRepository, Path]) -> None:
    repo, env_dir = setup
    target = engine_file(env_dir)
    target.write_text(target.read_text() + "\n# edited in place\n")
    before = tree_digest(env_dir)
    result = run_cli("verify", "--python", str(env_dir), *profile_args(repo))
    assert result.code == 1, result.output
    commit = repo.head("main")
    last = result.stdout.rstrip("\n").splitlines()[-1]
    assert last.startswith("  remedy: ") and f"install --commit {commit}" in last, result.stdout
    assert f"--python {env_dir}" in last
    assert tree_digest(env_dir) == before  # verify only looks


def test_same_commit_over_modified_files_says_it_repaired_them(
    setup: tuple[SourceRepository, Path],
) -> None:
    repo, env_dir = setup
    target = engine_file(env_dir)
    assert "# edited in place" in target.read_text()  # left by the test above
    commit = repo.head("main")
    result = run_cli("install", "--commit", commit, "--python", str(env_dir), *profile_args(repo))
    assert result.code == 0, result.output
    assert "repaired: 1 modified file of the same build reinstalled" in result.stdout
    assert "automl_refengine/__init__.py" in result.stdout
    assert "# edited in place" not in target.read_text()
    assert run_cli("verify", "--python", str(env_dir), *profile_args(repo)).code == 0
    # The installed files are the environment's own: editing one never edits uv's cache.
    assert target.stat().st_nlink == 1


def test_an_interrupted_install_names_its_distribution(
    setup: tuple[SourceRepository, Path], tmp_path: Path
) -> None:
    """A first install killed part-way into an empty venv; diagnose is asked without the
    profile flags (the default profile names another distribution)."""
    repo, _ = setup
    env_dir = make_venv(tmp_path / "env")
    marker = tmp_path / "paused"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(AUTOML_SETUP_PAUSE_AT="journal-written", AUTOML_SETUP_PAUSE_FILE=str(marker))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_server.faces.cli", "install", "--branch", "main",
         "--python", str(env_dir), *profile_args(repo)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "install never paused"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    before = tree_digest(env_dir)
    result = run_cli("diagnose", "--python", str(env_dir))
    assert result.code == 1, result.output
    assert f"  - an install of {REFERENCE_DISTRIBUTION} (commit {repo.head('main')}" in (
        result.stdout
    )
    # Not the profile's distribution (the command's profile line still names what it used).
    assert "nvidia-automl-core) is not installed" not in result.stdout, result.stdout
    assert f"automl-setup repair --python {env_dir}" in result.stdout
    assert tree_digest(env_dir) == before


def test_a_closed_pipe_never_stops_an_install(
    setup: tuple[SourceRepository, Path], tmp_path: Path
) -> None:
    """`automl-setup install ... 2>&1 | head -0`: the progress lines and the result find the
    pipe closed; the install completes all the same and exits 141, quietly."""
    repo, _ = setup
    env_dir = tmp_path / "env"
    argv = [sys.executable, "-m", "mcp_server.faces.cli", "install", "--branch", "main",
            "--python", str(env_dir), "--create-env", *profile_args(repo)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    assert closed_pipe_run(*argv, env=env, stderr_too=True) == (141, "")
    assert run_cli("verify", "--python", str(env_dir), *profile_args(repo)).code == 0
