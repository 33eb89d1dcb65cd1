"""SIGKILL in the middle of an install, then repair: the previous engine comes back byte for byte.

Real processes and real signals: the install runs as its own process group, stops at one of the
fault-injection points of environment/transaction.py (AUTOML_SETUP_PAUSE_AT /
AUTOML_SETUP_PAUSE_FILE) or is caught while `uv pip install` runs, and the whole group is killed
with SIGKILL."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import CliResult, profile_args, run_cli
from support.engines import engine_marker, site_packages
from support.install_process import Install
from support.trees import env_snapshot

from mcp_server.children.uv import uv_binary
from mcp_server.environment.transaction import PAUSE_POINTS
from mcp_server.source.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    SourceRepository,
    reference_engine_source,
)

pytestmark = pytest.mark.slow

HISTORY = ".automl-setup/history.jsonl"
STATE = ".automl-setup"


@pytest.fixture
def source_repo(tmp_path: Path) -> SourceRepository:
    """Overrides conftest's: `main` and `dev/next` that differ in more than their marker, so a
    rollback has real work: a module only `main` has, a module only `dev/next` has, and a
    dependency (pathspec) that only `dev/next` brings into the environment."""
    repo = SourceRepository(tmp_path / "repo")
    pkg = f"{repo.subdirectory}/src/automl_refengine"
    repo.commit_engine("main", marker="main-1", files={f"{pkg}/only_in_main.py": "X = 1\n"})
    pyproject = (reference_engine_source() / "pyproject.toml").read_text()
    with_dep, count = re.subn(r"(?m)^dependencies = \[", 'dependencies = ["pathspec", ', pyproject)
    assert count == 1
    repo.commit_engine(
        "dev/next",
        base="main",
        marker="dev-next-1",
        files={
            f"{repo.subdirectory}/pyproject.toml": with_dep,
            f"{pkg}/only_in_dev.py": "Y = 2\n",
        },
    )
    return repo


def group_commands(pgid: int) -> list[str]:
    """Command lines of the live processes of a process group (read from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                out.append(fh.read().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, IndexError, ValueError):
            continue
    return out


def history_lines(env_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (env_dir / HISTORY).read_text().splitlines()]


def without(snapshot: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in snapshot.items() if k not in names}


def outside_state(snapshot: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in snapshot.items() if not k.startswith(STATE + "/")}


def verify(repo: SourceRepository, env_dir: Path, *extra: str) -> CliResult:
    return run_cli("verify", "--python", str(env_dir), *profile_args(repo), *extra)


def assert_interrupted(repo: SourceRepository, env_dir: Path) -> None:
    """verify names the interrupted install and the repair command, and changes nothing."""
    before = env_snapshot(env_dir)
    text = verify(repo, env_dir)
    assert text.code == 1, text.output
    assert text.stdout.startswith("interrupted:")
    assert f"automl-setup repair --python {env_dir}" in text.stdout
    as_json = verify(repo, env_dir, "--json")
    assert as_json.code == 1
    assert json.loads(as_json.stdout)["status"] == "interrupted"
    assert env_snapshot(env_dir) == before


def assert_rolled_back(
    repo: SourceRepository,
    env_dir: Path,
    before: dict[str, str],
    history_before: list[dict],
    txid: str,
) -> None:
    after = env_snapshot(env_dir)
    assert without(after, HISTORY) == without(before, HISTORY)
    lines = history_lines(env_dir)
    assert lines[:-1] == history_before
    last = lines[-1]
    assert (last["event"], last["transaction"]) == ("rolled-back", txid)
    assert last["commit"] == repo.head("dev/next")
    assert last["requested_ref"] == "refs/heads/dev/next"
    assert "interrupted" in last["detail"]
    assert not (env_dir / STATE / "journal.json").exists()
    assert engine_marker(env_dir) == "main-1"
    site = site_packages(env_dir)
    assert (site / "automl_refengine" / "only_in_main.py").is_file()
    assert not list(site.glob("pathspec*"))
    ok = verify(repo, env_dir)
    assert ok.code == 0, ok.output
    assert ok.stdout.startswith("verified:")


@pytest.mark.parametrize("point", ["journal-written", "uv-installed", "direct-url-written"])
def test_kill_at_point_then_repair_restores_previous_engine(
    source_repo: SourceRepository, installed_env: Path, tmp_path: Path, point: str
) -> None:
    assert point in PAUSE_POINTS
    before = env_snapshot(installed_env)
    history_before = history_lines(installed_env)

    run = Install(source_repo, installed_env, tmp_path, pause_at=point)
    run.wait_paused(point)
    journal = json.loads((installed_env / STATE / "journal.json").read_text())
    run.kill()
    assert journal["pid"] == run.proc.pid
    assert journal["commit"] == source_repo.head("dev/next")
    assert run.work_dirs(), "the killed install's work dir should still be there"

    killed = env_snapshot(installed_env)
    assert outside_state(killed) != outside_state(before) or point == "journal-written"
    if point == "journal-written":
        assert outside_state(killed) == outside_state(before)  # only the state dir so far
        assert engine_marker(installed_env) == "main-1"
    else:
        # The new engine had landed: its own module, its extra dependency, not main's module.
        assert engine_marker(installed_env) == "dev-next-1"
        site = site_packages(installed_env)
        assert (site / "automl_refengine" / "only_in_dev.py").is_file()
        assert not (site / "automl_refengine" / "only_in_main.py").exists()
        assert list(site.glob("pathspec-*.dist-info"))
    assert_interrupted(source_repo, installed_env)

    repair = run_cli("repair", "--python", str(installed_env), env={"TMPDIR": str(run.tmpdir)})
    assert repair.code == 0, repair.output
    assert f"transaction {journal['txid']}" in repair.stdout
    assert "was rolled back; the previous engine is restored" in repair.stdout
    assert run.work_dirs() == []
    assert_rolled_back(source_repo, installed_env, before, history_before, journal["txid"])

    again = run_cli("repair", "--python", str(installed_env))
    assert again.code == 0
    assert again.stdout.startswith("nothing to repair")


def test_kill_after_record_written_completes_the_install(
    source_repo: SourceRepository, installed_env: Path, tmp_path: Path
) -> None:
    run = Install(source_repo, installed_env, tmp_path, pause_at="record-written")
    run.wait_paused("record-written")
    journal = json.loads((installed_env / STATE / "journal.json").read_text())
    run.kill()
    txid = journal["txid"]
    assert_interrupted(source_repo, installed_env)

    repair = run_cli("repair", "--python", str(installed_env), env={"TMPDIR": str(run.tmpdir)})
    assert repair.code == 0, repair.output
    assert f"install transaction {txid} had completed" in repair.stdout
    assert run.work_dirs() == []
    assert engine_marker(installed_env) == "dev-next-1"
    entries = history_lines(installed_env)
    assert [e["event"] for e in entries] == ["installed", "installed"]
    assert [e["transaction"] for e in entries].count(txid) == 1
    assert entries[-1]["commit"] == source_repo.head("dev/next")
    ok = verify(source_repo, installed_env, "--json")
    assert ok.code == 0, ok.output
    assert json.loads(ok.stdout)["commit"] == source_repo.head("dev/next")
    assert not (installed_env / STATE / "journal.json").exists()


def test_install_after_a_killed_install_repairs_first_and_says_so(
    source_repo: SourceRepository, installed_env: Path, tmp_path: Path
) -> None:
    run = Install(source_repo, installed_env, tmp_path, pause_at="uv-installed")
    run.wait_paused("uv-installed")
    txid = json.loads((installed_env / STATE / "journal.json").read_text())["txid"]
    run.kill()

    result = run_cli(
        "install",
        "--branch",
        "dev/next",
        "--python",
        str(installed_env),
        *profile_args(source_repo),
        env={"TMPDIR": str(run.tmpdir)},
    )
    assert result.code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith(
        f"repair: an interrupted install of {REFERENCE_DISTRIBUTION} (transaction {txid}"
    )
    assert "the previous engine is restored" in first
    assert "installed: automl-refengine 0.1.0" in result.stdout
    assert run.work_dirs() == []
    assert engine_marker(installed_env) == "dev-next-1"
    entries = history_lines(installed_env)
    assert [e["event"] for e in entries] == ["installed", "rolled-back", "installed"]
    assert entries[1]["transaction"] == txid
    assert entries[2]["transaction"] != txid
    assert verify(source_repo, installed_env).code == 0


def test_kill_while_uv_is_installing(
    source_repo: SourceRepository, installed_env: Path, tmp_path: Path
) -> None:
    before = env_snapshot(installed_env)
    history_before = history_lines(installed_env)
    # The pause right after uv is a backstop: a uv too quick for the /proc polling to see, or
    # one that ends in the moment before the kill, leaves the install there, killed before any
    # later step, not gone on to finish.
    run = Install(source_repo, installed_env, tmp_path, pause_at="uv-installed")
    uv = uv_binary()
    deadline = time.monotonic() + 180
    while not run.marker.exists():
        commands = group_commands(run.proc.pid)
        if any(c.startswith(uv) and " pip install " in c for c in commands):
            time.sleep(0.05)  # let uv get to changing the environment
            break
        if run.proc.poll() is not None:
            pytest.fail(f"the install exited before uv was seen running:\n{run.log()}")
        if time.monotonic() > deadline:
            run.kill()
            pytest.fail("uv pip install never started")
    run.kill()
    deadline = time.monotonic() + 10
    while group_commands(run.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_commands(run.proc.pid) == []  # uv died with its parent's group
    journal = json.loads((installed_env / STATE / "journal.json").read_text())
    assert_interrupted(source_repo, installed_env)

    repair = run_cli("repair", "--python", str(installed_env), env={"TMPDIR": str(run.tmpdir)})
    assert repair.code == 0, repair.output
    assert "was rolled back" in repair.stdout
    assert_rolled_back(source_repo, installed_env, before, history_before, journal["txid"])


def test_kill_in_an_environment_without_a_previous_engine(
    source_repo: SourceRepository, tmp_path: Path
) -> None:
    """Rollback to "nothing installed" also removes the dependencies the install brought."""
    env_dir = tmp_path / "fresh"
    subprocess.run(
        [uv_binary(), "venv", "--quiet", "--python", sys.executable, str(env_dir)],
        check=True,
        capture_output=True,
    )
    before = env_snapshot(env_dir)
    run = Install(source_repo, env_dir, tmp_path, pause_at="direct-url-written")
    run.wait_paused("direct-url-written")
    run.kill()
    assert engine_marker(env_dir) == "dev-next-1"
    repair = run_cli("repair", "--python", str(env_dir))
    assert repair.code == 0, repair.output
    after = env_snapshot(env_dir)
    # uv leaves its own empty mutex file `.lock` in any venv it touched, even on a failed
    # `uv pip install`; removing a lock file another uv may hold would be wrong.
    assert (env_dir / ".lock").read_bytes() == b""
    assert without(outside_state(after), ".lock") == outside_state(before)
    assert [e["event"] for e in history_lines(env_dir)] == ["rolled-back"]
    no_engine = verify(source_repo, env_dir, "--json")
    assert no_engine.code == 3, no_engine.output
    assert json.loads(no_engine.stdout)["status"] == "no-engine"


def test_second_install_is_refused_while_the_first_holds_the_lock(
    source_repo: SourceRepository, installed_env: Path, tmp_path: Path
) -> None:
    first = Install(source_repo, installed_env, tmp_path, pause_at="journal-written")
    try:
        first.wait_paused("journal-written")
        held = env_snapshot(installed_env)
        for command in (
            [
                "install",
                "--branch",
                "dev/next",
                "--python",
                str(installed_env),
                *profile_args(source_repo),
            ],
            ["repair", "--python", str(installed_env)],
        ):
            refused = run_cli(*command)
            assert refused.code == 1, refused.output
            assert f"environment {installed_env} is in use by another automl-setup process" in (
                refused.stderr
            )
            assert f"(pid {first.proc.pid})" in refused.stderr
            assert env_snapshot(installed_env) == held
    finally:
        first.kill()
    repair = run_cli("repair", "--python", str(installed_env))
    assert repair.code == 0, repair.output
    assert engine_marker(installed_env) == "main-1"
    assert verify(source_repo, installed_env).code == 0
