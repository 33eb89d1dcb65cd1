"""The records under faults: damaged journals, honest rollback messages, file
system failures as refusals, read-only site-packages, and a live install told from a dead one.

Tests run as root, and root ignores permission bits, so writes are made to fail the ways that
still work as root: a directory where a file is expected (EISDIR), a file where a directory is
expected (ENOTDIR), and `chattr +i` (EPERM even for root, on this ext4 file system)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import CliResult, profile_args, run_cli
from support.engines import engine_marker, site_packages
from support.experiments import Experiment, write_manifest
from support.install_process import Install
from support.trees import env_snapshot

from mcp_server import operations
from mcp_server.environment import rollback as rollback_module
from mcp_server.environment import transaction as transaction_module
from mcp_server.errors import SetupError
from mcp_server.fsutil import (
    append_json_line,
    atomic_write_bytes,
    exclusive_create,
    exclusive_lock,
    new_directory,
    numbered_append,
    read_json_lines,
)
from mcp_server.requests import InstallRequest
from mcp_server.source.profile import load_profile
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

STATE = ".automl-setup"


def install_next(env_dir: Path, repo: SourceRepository) -> CliResult:
    return run_cli("install", "--branch", "dev/next", "--python", str(env_dir), *profile_args(repo))


def assert_clean_refusal(output: str) -> None:
    """One `error:` line first, not the CLI's catch-all for a bug (it never prints a traceback)."""
    assert "unexpected failure" not in output, output
    # Progress lines ("[3/7 build] ...") and the default-branch notice may come first; then
    # exactly one error.
    lines = output.splitlines()
    while lines and lines[0].startswith(("[", "no --branch given")):
        lines.pop(0)
    assert lines and lines[0].startswith("error: "), output
    assert sum(line.startswith("error: ") for line in lines) == 1, output


# --------------------------------------------------------------------------------------------
# Class 8: every file primitive turns an OSError into a refusal naming the path and the cause


def test_failed_atomic_write_refuses_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "state" / "engine-record.json"
    target.mkdir(parents=True)  # a directory where the file goes: the rename fails, as root too
    with pytest.raises(SetupError) as info:
        atomic_write_bytes(target, b"{}")
    assert str(target) in info.value.cause
    assert "Is a directory" in info.value.cause
    assert "disk space" in info.value.remedy
    assert sorted(p.name for p in target.parent.iterdir()) == ["engine-record.json"]


def _primitive_calls(under: Path) -> list[tuple[str, Callable[[], object]]]:
    def numbered() -> None:
        with numbered_append(under, key="attempt", what="attempts ledger"):
            pass

    def lock() -> None:
        with exclusive_lock(under, step="launch", holder="environment X"):
            pass

    return [
        ("atomic_write_bytes", lambda: atomic_write_bytes(under, b"x")),
        ("exclusive_create", lambda: exclusive_create(under, b"x")),
        ("append_json_line", lambda: append_json_line(under, {"a": 1})),
        ("numbered_append", numbered),
        ("exclusive_lock", lock),
        ("new_directory", lambda: new_directory(under)),
    ]


def test_every_primitive_refuses_with_path_and_cause(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    under = blocker / "state" / "file.json"  # ENOTDIR / EEXIST for mkdir: fails as root
    for name, call in _primitive_calls(under):
        with pytest.raises(SetupError) as info:
            call()
        assert str(blocker) in info.value.cause, name
        assert info.value.remedy, name
    directory = tmp_path / "ledger.jsonl"
    directory.mkdir()
    with pytest.raises(SetupError) as info:
        read_json_lines(directory, what="attempts ledger")
    assert str(directory) in info.value.cause
    assert "Is a directory" in info.value.cause
    assert blocker.read_text() == "x"


def test_exclusive_create_still_reports_an_existing_file(tmp_path: Path) -> None:
    """Callers rely on FileExistsError to tell "taken" from "broken"."""
    path = tmp_path / "binding.json"
    path.write_text("mine")
    with pytest.raises(FileExistsError):
        exclusive_create(path, b"other")
    assert path.read_text() == "mine"


# --------------------------------------------------------------------------------------------
# Class 8 and 3 through the real command line


@pytest.mark.slow
def test_record_path_that_is_a_directory_is_a_clear_refusal(
    installed_env: Path, source_repo: SourceRepository
) -> None:
    record = installed_env / STATE / "engine-record.json"
    saved = record.read_bytes()
    record.unlink()
    record.mkdir()
    before = env_snapshot(installed_env)
    for command in ("verify", "install"):
        result = run_cli(command, "--python", str(installed_env), *profile_args(source_repo))
        assert result.code == 1, result.output
        assert_clean_refusal(result.output)
        assert f"{record}" in result.stderr and "Is a directory" in result.stderr
        assert env_snapshot(installed_env) == before
    record.rmdir()
    record.write_bytes(saved)
    assert engine_marker(installed_env) == "main-1"


@pytest.mark.slow
def test_schema_invalid_history_line_is_a_clear_refusal(
    installed_env: Path, source_repo: SourceRepository
) -> None:
    history = installed_env / STATE / "history.jsonl"
    with history.open("a") as fh:
        fh.write(json.dumps({"event": "installed", "commit": 7}) + "\n")
    before = env_snapshot(installed_env)
    shown = run_cli("history", "--python", str(installed_env))
    assert shown.code == 1, shown.output
    assert_clean_refusal(shown.output)
    assert f"{history} line 2 is not a valid install history entry" in shown.stderr
    refused = install_next(installed_env, source_repo)
    assert refused.code == 1, refused.output
    assert f"{history} line 2 is not a valid install history entry" in refused.stderr
    assert env_snapshot(installed_env) == before
    assert engine_marker(installed_env) == "main-1"


def damage_journal(env_dir: Path) -> dict[str, object]:
    """A journal that parses but lacks fields: the old reader's defaults uninstalled everything."""
    journal = {"txid": "0123456789ab", "pid": 999999999}
    (env_dir / STATE / "journal.json").write_text(json.dumps(journal))
    return journal


@pytest.mark.slow
def test_damaged_journal_refuses_install_and_changes_nothing(
    installed_env: Path, source_repo: SourceRepository
) -> None:
    damage_journal(installed_env)
    before = env_snapshot(installed_env)
    result = install_next(installed_env, source_repo)
    assert result.code == 1, result.output
    assert_clean_refusal(result.output)
    assert "the journal is damaged; nothing was changed" in result.stderr
    assert str(installed_env / STATE / "journal.json") in result.stderr
    assert str(installed_env / STATE / "transactions") in result.stderr
    assert "restored" not in result.output
    assert env_snapshot(installed_env) == before
    assert engine_marker(installed_env) == "main-1"


@pytest.mark.slow
def test_a_valid_journal_naming_files_outside_the_environment_is_not_obeyed(
    installed_env: Path, source_repo: SourceRepository, tmp_path: Path
) -> None:
    """Schema-valid but not ours: a rollback never removes or overwrites a file outside the
    environment because a journal says so."""
    run = Install(source_repo, installed_env, tmp_path, pause_at="uv-installed")
    run.wait_paused("uv-installed")
    run.kill()
    journal_path = installed_env / STATE / "journal.json"
    journal = json.loads(journal_path.read_text())
    victim = tmp_path / "precious.txt"
    victim.write_text("not automl-setup's")
    journal["new_files"].append(str(victim))
    journal["backup"].append([str(tmp_path / "overwritten.txt"), "000000"])
    journal_path.write_text(json.dumps(journal))
    before = env_snapshot(installed_env)
    repair = run_cli("repair", "--python", str(installed_env))
    assert repair.code == 1, repair.output
    assert_clean_refusal(repair.output)
    assert "outside" in repair.stderr and "nothing was changed" in repair.stderr
    assert victim.read_text() == "not automl-setup's"
    assert not (tmp_path / "overwritten.txt").exists()
    assert env_snapshot(installed_env) == before


@pytest.mark.slow
def test_failed_rollback_in_repair_keeps_the_journal_and_says_where_the_files_are(
    installed_env: Path, source_repo: SourceRepository, tmp_path: Path
) -> None:
    run = Install(source_repo, installed_env, tmp_path, pause_at="uv-installed")
    run.wait_paused("uv-installed")
    journal_path = installed_env / STATE / "journal.json"
    journal = json.loads(journal_path.read_text())
    run.kill()
    backup = installed_env / STATE / "transactions" / journal["txid"] / "backup"
    victim = backup / journal["backup"][0][1]
    victim.unlink()  # one backed-up file of the previous engine is gone: the restore must fail
    repair = run_cli("repair", "--python", str(installed_env))
    assert repair.code == 1, repair.output
    assert_clean_refusal(repair.output)
    assert "rollback" in repair.stderr and "failed" in repair.stderr
    assert "restored" not in repair.output.replace("not restored", "")
    assert str(backup) in repair.stderr
    assert "journal" in repair.stderr and "repair" in repair.stderr
    assert journal_path.is_file()
    assert json.loads(journal_path.read_text()) == journal
    verify = run_cli("verify", "--python", str(installed_env), *profile_args(source_repo))
    assert verify.stdout.startswith("interrupted:"), verify.output


@pytest.mark.slow
def test_failed_rollback_during_install_keeps_the_cause_and_says_the_rollback_failed(
    installed_env: Path, source_repo: SourceRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process, with two injected faults: uv fails, then the rollback's own uv fails."""

    def uv_fails(self: object, wheel: Path, before: object) -> None:
        raise SetupError("install", "uv exited with status 2", "fix the network")

    def restore_fails(*args: object) -> None:
        raise SetupError("rollback", "uv exited with status 1 (restore)", "see the uv log")

    monkeypatch.setattr(transaction_module.Transaction, "_uv_install", uv_fails)
    monkeypatch.setattr(rollback_module, "_restore_dependencies", restore_fails)
    profile = load_profile(
        None,
        repository=source_repo.url,
        subdirectory=source_repo.subdirectory,
        distribution=REFERENCE_DISTRIBUTION,
        requirement=None,
    )
    request = InstallRequest(profile=profile, python=str(installed_env), branch="dev/next")
    with pytest.raises(SetupError) as info:
        operations.install(request)
    text = info.value.full_text()
    assert info.value.step == "install"
    assert "uv exited with status 2" in text  # the original cause is kept
    assert "the rollback failed" in text and "uv exited with status 1 (restore)" in text
    assert "restored" not in text.replace("not restored", "")
    journal = installed_env / STATE / "journal.json"
    assert journal.is_file() and str(journal) in text
    txid = json.loads(journal.read_text())["txid"]
    assert str(installed_env / STATE / "transactions" / txid / "backup") in text
    assert "automl-setup repair" in text


@pytest.mark.slow
def test_unwritable_experiment_files_are_clear_refusals(
    installed_env: Path, tmp_path: Path, immutable: Callable[[Path], None]
) -> None:
    """The attempts ledger (immutable: EPERM as root) and the environment's experiment registry
    (a file where its directory goes)."""
    manifest = write_manifest(tmp_path / "m.yaml", max_trials=1, sleep=0.0)
    exp = Experiment(manifest, tmp_path / "ws", installed_env)
    assert exp.cli("launch").code == 0

    immutable(exp.attempts_path)
    ledger = exp.attempts_path.read_bytes()
    resumed = exp.cli("resume")
    assert resumed.code == 1, resumed.output
    assert_clean_refusal(resumed.output)
    assert f"{exp.attempts_path}: Operation not permitted" in resumed.stderr
    assert exp.attempts_path.read_bytes() == ledger

    third = Experiment(
        write_manifest(tmp_path / "m3.yaml", experiment_id="exp-3", max_trials=1, sleep=0.0),
        tmp_path / "ws3",
        installed_env,
        experiment_id="exp-3",
    )
    registry = installed_env / STATE / "experiments"
    shutil.rmtree(registry)
    registry.write_text("not a directory")
    before = env_snapshot(installed_env)
    blocked = third.cli("launch")
    assert blocked.code == 1, blocked.output
    assert_clean_refusal(blocked.output)
    assert str(registry) in blocked.stderr
    assert env_snapshot(installed_env) == before


@pytest.mark.slow
def test_unwritable_experiment_folder_is_a_clear_refusal(
    installed_env: Path, tmp_path: Path, immutable: Callable[[Path], None]
) -> None:
    """The workspace's sidecar folder is immutable (EPERM as root): no new experiment folder."""
    sidecar = tmp_path / "ws" / STATE
    sidecar.mkdir(parents=True)
    exp = Experiment(
        write_manifest(tmp_path / "m.yaml", max_trials=1, sleep=0.0), tmp_path / "ws", installed_env
    )
    immutable(sidecar)
    refused = exp.cli("launch")
    assert refused.code == 1, refused.output
    assert_clean_refusal(refused.output)
    assert str(exp.sidecar) in refused.stderr
    assert not exp.sidecar.exists()


# --------------------------------------------------------------------------------------------
# Class 9: read-only site-packages is refused before anything is touched


@pytest.mark.slow
def test_read_only_site_packages_is_refused_before_anything_is_touched(
    installed_env: Path, source_repo: SourceRepository, immutable: Callable[[Path], None]
) -> None:
    site = site_packages(installed_env)
    before = env_snapshot(installed_env)
    immutable(site)
    result = install_next(installed_env, source_repo)
    assert result.code == 1, result.output
    assert_clean_refusal(result.output)
    assert "error: install: " in result.stderr
    assert f"{site} is not writable" in result.stderr
    assert "remedy:" in result.stderr
    assert env_snapshot(installed_env) == before
    assert not (installed_env / STATE / "journal.json").exists()
    assert list((installed_env / STATE / "transactions").glob("*")) == []  # no backup made
    assert engine_marker(installed_env) == "main-1"


# --------------------------------------------------------------------------------------------
# Class 13: a live install is "in progress", only a dead one is "interrupted"


@pytest.mark.slow
def test_verify_during_a_live_install_says_in_progress(
    installed_env: Path, source_repo: SourceRepository, tmp_path: Path
) -> None:
    run = Install(source_repo, installed_env, tmp_path, pause_at="journal-written")
    try:
        run.wait_paused("journal-written")
        held = env_snapshot(installed_env)
        live = run_cli("verify", "--python", str(installed_env), *profile_args(source_repo))
        assert live.code == 1, live.output
        assert live.stdout.startswith("in-progress:"), live.output
        assert f"pid {run.proc.pid}" in live.stdout
        assert "repair" not in live.stdout
        as_json = run_cli(
            "verify", "--json", "--python", str(installed_env), *profile_args(source_repo)
        )
        assert json.loads(as_json.stdout)["status"] == "in-progress"
        assert env_snapshot(installed_env) == held
    finally:
        run.kill()
    dead = run_cli("verify", "--python", str(installed_env), *profile_args(source_repo))
    assert dead.code == 1
    assert dead.stdout.startswith("interrupted:"), dead.output
    assert f"automl-setup repair --python {installed_env}" in dead.stdout
    assert run_cli("repair", "--python", str(installed_env)).code == 0
    assert engine_marker(installed_env) == "main-1"
