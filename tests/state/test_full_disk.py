"""An environment and a workspace on a real, small file system (tmpfs) filled to its last
KiB: a launch refused on the full disk leaves the environment as verify vouched for it (no
bytecode written into it by the engine's processes, truncated or whole) and the experiment id
free, so once there is space again the same launch runs. As root (a mount): skipped with the
reason otherwise."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_cli
from support.engines import engine_bytecode, install_main
from support.experiments import Experiment, Reaper, launch_detached, wait_for, write_manifest
from support.mounts import fill, tmpfs
from support.refengine import group_alive, holding

from mcp_server.source.sourcerepo import SourceRepository


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "fs") as mount:
        yield mount


@pytest.mark.slow
def test_a_launch_refused_on_a_full_disk_writes_nothing_into_the_environment(
    tmp_path: Path, small_fs: Path, source_repo: SourceRepository
) -> None:
    env, workspace = small_fs / "env", small_fs / "runs"
    install_main(env, source_repo)
    compiled = engine_bytecode(env)
    assert len(compiled) >= 10  # the install wrote it, each module's
    manifest = write_manifest(tmp_path / "m.yaml", experiment_id="full-disk", max_trials=2)
    launch = ["launch", "--manifest", str(manifest), "--workspace", str(workspace),
              "--python", str(env)]  # fmt: skip

    ballast = fill(small_fs, leave=4096)
    refused = run_cli(*launch)
    assert refused.code == 1, refused.output
    assert "No space left on device" in refused.stderr, refused.output
    # Nothing the engine's processes ran wrote into the environment: no bytecode to poison it;
    # and the id was not burned (no binding stays behind without an attempt).
    assert engine_bytecode(env) == compiled
    assert not (workspace / ".automl-setup" / "full-disk").exists()

    ballast.unlink()
    verified = run_cli("verify", "--python", str(env))
    assert verified.code == 0, verified.output
    launched = run_cli(*launch)
    assert launched.code == 0, launched.output
    assert engine_bytecode(env) == compiled  # nor while it ran (trials included)


@pytest.mark.slow
def test_an_engine_that_cannot_start_is_no_manifest_problem(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    env = tmp_path / "env"
    install_main(env, source_repo)
    plant_bytecode(env, "automl_refengine.cli", cut=True)
    manifest = write_manifest(tmp_path / "m.yaml", experiment_id="crash", max_trials=1)
    workspace = tmp_path / "runs"
    refused = run_cli(
        "launch", "--manifest", str(manifest), "--workspace", str(workspace), "--python", str(env)
    )
    assert refused.code == 1, refused.output
    first = next(line for line in refused.stderr.splitlines() if line.startswith("error: "))
    assert "the engine failed to start or crashed running `automl-refengine plan`" in first
    assert "EOFError" in first, refused.stderr  # marshal data cut short, wherever it was cut
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
    plant_bytecode(env, "automl_refengine.cli", cut=True)
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


def plant_bytecode(env: Path, module: str, *, edit: str = "", cut: bool = False) -> Path:
    """A bytecode file of the engine's `module` with its source's header (so Python runs it
    instead of the source), compiled from the source plus `edit`, or cut short: what a full
    disk or another writer can leave."""
    code = (
        "import importlib.util, importlib._bootstrap_external as be, os, sys; "
        f"src = importlib.util.find_spec({module!r}).origin; "
        "pyc = importlib.util.cache_from_source(src); st = os.stat(src); "
        "code = compile(open(src).read() + sys.argv[1], src, 'exec', dont_inherit=True); "
        "data = bytes(be._code_to_timestamp_pyc(code, st.st_mtime, st.st_size)); "
        "data = data[: len(data) // 2] if sys.argv[2] == 'cut' else data; "
        "os.makedirs(os.path.dirname(pyc), exist_ok=True); open(pyc, 'wb').write(data); "
        "print(pyc)"
    )
    done = subprocess.run(
        [str(env / "bin" / "python"), "-I", "-B", "-c", code, edit, "cut" if cut else "whole"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


@pytest.mark.slow
def test_verify_deep_names_the_engines_bytecode_that_is_not_its_source_and_the_remedy_works(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    """Bytecode no RECORD lists, which Python would run instead of the checked source: an
    edited file (it imports fine, so only --deep can see it) and one cut short. Both named;
    the remedy printed removes exactly them; a stale file Python ignores is no finding."""
    env = install_main(tmp_path / "env", source_repo)
    edited = plant_bytecode(env, "automl_refengine.search", edit="\nEDITED = True\n")
    cut = plant_bytecode(env, "automl_refengine.report", cut=True)
    stale = plant_bytecode(env, "automl_refengine.layout")
    source = stale.parent.parent / "layout.py"
    os.utime(source, (1, 1))  # its header no longer matches: Python compiles the source
    before = source.read_bytes()

    report = run_cli("verify", "--python", str(env), "--deep")
    assert report.code == 1, report.output
    assert report.stdout.startswith("mismatch: "), report.stdout
    differs = [line for line in report.stdout.splitlines() if line.startswith("  differs: ")]
    assert len(differs) == 2, report.stdout
    assert any(str(edited) in d and "not compiled from its source" in d for d in differs)
    assert any(str(cut) in d and "cut short or damaged (EOFError" in d for d in differs)
    remedy = next(line for line in report.stdout.splitlines() if line.startswith("  remedy: "))
    assert "remove the engine's bytecode that is not compiled from its source" in remedy
    command = remedy.split("`")[1]
    assert command == f"rm -f -- {edited} {cut}" or command == f"rm -f -- {cut} {edited}"

    subprocess.run(command, shell=True, check=True)
    assert run_cli("verify", "--python", str(env), "--deep").code == 0
    assert stale.exists() and source.read_bytes() == before  # nothing else touched


@pytest.mark.slow
def test_a_disk_that_fills_while_an_experiment_runs_loses_nothing(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    """The workspace's disk fills between two trials: the engine stops as it stops (here it
    cannot write its ledger); `status` tells the truth while the disk is still full; with space
    again `resume` finishes the budget, every trial exactly once, from a ledger of whole lines."""
    with tmpfs(tmp_path / "fs", size="16m") as mount:
        hold = tmp_path / "hold"
        manifest = write_manifest(tmp_path / "manifest.yaml", hold=hold, max_trials=4)
        exp = Experiment(manifest, mount / "ws", installed_env, hold=hold)
        with holding(hold, 1):
            pid = launch_detached(exp, reaper)
            wait_for("the first trial", lambda: exp.trials_done() >= 1)
            ballast = fill(mount, leave=0)
        assert reaper.reap(pid) != 0

        ledger = (exp.engine_dir / "ledger.jsonl").read_bytes()
        assert ledger.endswith(b"\n")  # whole lines only
        status = exp.status()
        assert status["state"] == "interrupted" and not status["controller_running"], status
        assert status["trials_done"] == len(exp.finished_trials())  # the ledger, not a snapshot

        # A trial the dead controller had started runs on to its end (the engine's resume
        # refuses while it does): wait for it, as its refusal says. This process is the
        # subreaper that inherits it, so it reaps it too (init would, on a real machine).
        groups = [e["pgid"] for e in exp.engine_events("trial_started") if e["pgid"]]

        def settled() -> bool:
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            return not any(map(group_alive, groups))

        wait_for("the orphaned trials", settled, timeout=120)
        ballast.unlink()
        resumed = exp.cli("resume")
        assert resumed.code == 0, resumed.output
        assert [index for index, _params, _value in exp.finished_trials()] == [0, 1, 2, 3]
        assert exp.status()["state"] == "completed"
