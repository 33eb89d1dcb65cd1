"""An OSError at any write or open of automl-setup's state is a refusal naming the step, the
cause and the remedy, never the CLI's "unexpected failure"; and nothing changed.

Tests run as root, and root ignores permission bits (a `chmod a-w` folder is still writable
for root), so folders and files are made unwritable with `chattr +i` instead: an immutable
file cannot be opened for writing, and no entry can be created in an immutable directory, with
EPERM even for root (ext4 here; skipped where the file system has no immutable attribute)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli
from support.experiments import (
    EXP,
    Reaper,
    assert_refused_once,
    freeze,
    make_interrupted,
)
from support.trees import tree_digest

from mcp_server.errors import SetupError
from mcp_server.fsutil import locked_directory, open_lock, open_log, open_state


def assert_refusal(output: str, step: str) -> None:
    """Exactly one `error: STEP: CAUSE` line and a remedy, never the catch-all for a bug."""
    assert "unexpected failure" not in output and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {step}: "), output
    assert "\n  remedy: " in output, output


@pytest.mark.slow
def test_resume_into_a_read_only_experiment_folder_is_a_refusal(
    tmp_path: Path, installed_env: Path, reaper: Reaper, immutable: Callable[[Path], None]
) -> None:
    """The crash this fixes: the attempt log could not be created (PermissionError, "unexpected
    failure"). Its ledger can still be appended to, so it records the refusal, as ever."""
    exp = make_interrupted(tmp_path, installed_env, reaper)
    immutable(exp.sidecar)  # no attempt-2.log can be created in it, not even by root
    before = freeze(exp, installed_env)

    result = exp.cli("resume")

    assert result.code == 1, result.output
    assert_refusal(result.stderr, "open log")
    log = exp.sidecar / "attempt-2.log"
    assert f"cannot open log {log}: Operation not permitted" in result.stderr
    assert "immutable attribute (lsattr)" in result.stderr  # the remedy names the cause
    assert_refused_once(exp, before, installed_env, reason=f"cannot open log {log}")
    assert not log.exists()


@pytest.mark.slow
def test_a_read_only_experiment_folder_and_ledger_refuse_with_their_own_step(
    tmp_path: Path, installed_env: Path, reaper: Reaper, immutable: Callable[[Path], None]
) -> None:
    """When even the attempts ledger cannot record the refusal, the refusal still names the
    step that failed first (and says it is not recorded), not the ledger's failure."""
    exp = make_interrupted(tmp_path, installed_env, reaper)
    for path in [*exp.sidecar.iterdir(), exp.sidecar]:
        immutable(path)
    before = tree_digest(exp.workspace), sorted(exp.workspace.rglob("*"))
    lock = exp.sidecar / "controller.lock"
    stop = ["stop", "--experiment-id", EXP, "--workspace", str(exp.workspace)]

    for result, step, cause in (
        (exp.cli("resume"), "lock", f"cannot lock {lock}: Operation not permitted"),
        (run_cli(*stop), "stop", f"experiment {EXP} is not running"),
    ):
        assert result.code == 1, result.output
        assert_refusal(result.stderr, step)
        assert cause in result.stderr
        assert "not recorded in the attempts ledger: cannot append to " in result.stderr
        assert f"{exp.attempts_path}: Operation not permitted" in result.stderr
        assert (tree_digest(exp.workspace), sorted(exp.workspace.rglob("*"))) == before


def test_a_state_file_to_be_created_in_a_missing_folder_is_a_refusal(tmp_path: Path) -> None:
    """FileNotFoundError is an answer only to a read ("none yet"); to a call that creates the
    file it is a failure, which callers never expect as an exception of its own."""
    gone = tmp_path / ".automl-setup" / "exp"  # the experiment's folder, removed meanwhile
    for name, call in (
        ("open log", lambda: open_log(gone / "attempt-1.log")),
        ("write", lambda: open_state(gone / "f", os.O_WRONLY | os.O_CREAT, step="write")),
    ):
        with pytest.raises(SetupError) as info:
            call()
        assert info.value.step == name
        assert f"{gone}" in info.value.cause and "No such file or directory" in info.value.cause
        assert "then run the command again" in info.value.remedy
    with pytest.raises(FileNotFoundError):  # a read still says "missing"
        open_state(gone / "f", os.O_RDONLY, step="read")
    assert not gone.exists()
    os.close(open_lock(gone / "controller.lock"))  # a lock makes its folders, as before
    assert (gone / "controller.lock").is_file()


def test_locking_a_directory_that_is_a_file_is_a_refusal(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "parent"
    not_a_dir.write_text("a file where the folder goes")
    for shared in (False, True):
        with pytest.raises(SetupError) as info, locked_directory(not_a_dir, shared=shared):
            pass
        assert info.value.step == "lock"
        assert f"cannot lock {not_a_dir}: Not a directory" in info.value.cause
    assert not_a_dir.read_text() == "a file where the folder goes"
