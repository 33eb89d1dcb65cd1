"""An environment and a workspace on a real, small file system (tmpfs) filled to its last
KiB: a launch refused on the full disk leaves the environment as verify vouched for it (no
bytecode written into it by the engine's processes, truncated or whole) and the experiment id
free, so once there is space again the same launch runs. As root (a mount): skipped with the
reason otherwise."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_cli
from support.engines import install_main
from support.experiments import write_manifest

from mcp_server.source.sourcerepo import SourceRepository

BALLAST = "ballast"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 96 MB tmpfs, unmounted afterwards (also on failure)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path, leave: int) -> Path:
    """A ballast file taking all but about `leave` bytes of the file system."""
    stats = os.statvfs(mount)
    free = stats.f_bavail * stats.f_frsize
    ballast = mount / BALLAST
    with ballast.open("wb") as out:
        out.truncate(0)
        os.posix_fallocate(out.fileno(), 0, max(0, free - leave))
    return ballast


def bytecode(env: Path) -> list[Path]:
    (site,) = env.glob("lib/python*/site-packages")
    return sorted((site / "automl_refengine").rglob("*.pyc"))


@pytest.mark.slow
def test_a_launch_refused_on_a_full_disk_leaves_no_bytecode_in_the_environment(
    tmp_path: Path, small_fs: Path, source_repo: SourceRepository
) -> None:
    env, workspace = small_fs / "env", small_fs / "runs"
    install_main(env, source_repo)
    assert bytecode(env) == []
    manifest = write_manifest(tmp_path / "m.yaml", experiment_id="full-disk", max_trials=2)
    launch = ["launch", "--manifest", str(manifest), "--workspace", str(workspace),
              "--python", str(env)]  # fmt: skip

    ballast = fill(small_fs, leave=4096)
    refused = run_cli(*launch)
    assert refused.code == 1, refused.output
    assert "No space left on device" in refused.stderr, refused.output
    # Nothing the engine's processes ran wrote into the environment: no bytecode to poison it;
    # and the id was not burned (no binding stays behind without an attempt).
    assert bytecode(env) == []
    assert not (workspace / ".automl-setup" / "full-disk").exists()

    ballast.unlink()
    verified = run_cli("verify", "--python", str(env))
    assert verified.code == 0, verified.output
    launched = run_cli(*launch)
    assert launched.code == 0, launched.output
    assert bytecode(env) == []  # nor while it ran (trials included)


def plant_truncated_bytecode(env: Path) -> Path:
    """What a full disk left before: the engine's cli module compiled by the environment's
    Python, then cut short (a short write renamed into place), header intact."""
    python = env / "bin" / "python"
    code = (
        "import importlib.util, py_compile; "
        "source = importlib.util.find_spec('automl_refengine.cli').origin; "
        "print(py_compile.compile(source, doraise=True))"
    )
    done = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    pyc = Path(done.stdout.strip())
    data = pyc.read_bytes()
    pyc.write_bytes(data[: max(64, len(data) // 2)])
    return pyc


@pytest.mark.slow
def test_an_engine_that_cannot_start_is_no_manifest_problem(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    env = tmp_path / "env"
    install_main(env, source_repo)
    plant_truncated_bytecode(env)
    manifest = write_manifest(tmp_path / "m.yaml", experiment_id="crash", max_trials=1)
    workspace = tmp_path / "runs"
    refused = run_cli(
        "launch", "--manifest", str(manifest), "--workspace", str(workspace), "--python", str(env)
    )
    assert refused.code == 1, refused.output
    first = next(line for line in refused.stderr.splitlines() if line.startswith("error: "))
    assert "the engine failed to start or crashed running `automl-refengine plan`" in first
    assert "marshal data too short" in first, refused.stderr
    assert "fix the manifest" not in refused.stderr
    assert f"automl-setup verify --python {env} --deep" in refused.stderr
    assert not (workspace / ".automl-setup" / "crash").exists()  # the id is still free


@pytest.mark.slow
def test_verify_says_an_engine_that_cannot_start_and_its_remedy_works(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    """Every recorded file matches, yet the engine does not import (bytecode cut short, which
    no RECORD lists): verify never says "verified" then, names the exception, and the remedy it
    prints gives a verified environment again."""
    env = tmp_path / "env"
    install_main(env, source_repo)
    plant_truncated_bytecode(env)
    report = run_cli("verify", "--python", str(env))
    assert report.code == 1, report.output
    assert report.stdout.startswith("cannot-start: automl-refengine in "), report.stdout
    assert "the engine does not start: importing its entry points fails with EOFError" in (
        report.stdout
    )
    remedy = next(line for line in report.stdout.splitlines() if line.startswith("  remedy: "))
    command = remedy.split("`")[1]
    assert command.startswith("find ") and "__pycache__" in command
    subprocess.run(command, shell=True, check=True)
    assert run_cli("verify", "--python", str(env)).code == 0
