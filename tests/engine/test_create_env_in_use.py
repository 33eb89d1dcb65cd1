"""A folder another automl-setup call is making into a venv (`--create-env`) is "in use" to every
other call, never "not a virtual environment"; one whose creator died says so.

create.py claims a new venv in one step under an exclusive flock of its parent folder: the
folder is made and its environment lock taken before the parent is let go, and only then is the
venv made in it. The tests build each state of such a claim exactly that way (the same fsutil
calls), so what another call sees there is decided by the code, never by timing."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from support.cli import CliResult, run_cli
from support.trees import tree_digest

from mcp_server.fsutil import exclusive_lock, locked_directory

WAIT_S = 60.0


def bogus_repository(tmp_path: Path) -> list[str]:
    """Never reached: an environment in use is refused before anything is resolved."""
    return ["--repository", (tmp_path / "never-read.git").as_uri()]


def claim_lock(env: Path) -> contextlib.AbstractContextManager[None]:
    """The environment lock a creator takes the moment the folder exists (create.py)."""
    return exclusive_lock(env / ".automl-setup" / "lock", step="install", holder=f"env {env}")


def state(env: Path) -> tuple[dict[str, str], list[str]]:
    """Every file's digest and every path (folders too) under the claimed folder."""
    return tree_digest(env), sorted(str(p.relative_to(env)) for p in env.rglob("*"))


def waits_on_flock(pid: int, directory: Path) -> bool:
    """True while process `pid` is blocked on a flock of `directory` (/proc/locks lists a
    blocked request as `N: -> FLOCK ... PID MAJ:MIN:INODE ...`)."""
    inode = os.stat(directory).st_ino
    with open("/proc/locks", encoding="ascii") as locks:
        return any(
            "->" in line and f" {pid} " in line and line.split()[6].endswith(f":{inode}")
            for line in locks
        )


def test_a_folder_made_but_not_yet_locked_is_waited_for_then_in_use(tmp_path: Path) -> None:
    """The instant between the creator's mkdir and its lock: the other call waits for the
    creator's parent flock (never judges the empty folder), then finds the lock held."""
    parent, env = tmp_path / "envs", tmp_path / "envs" / "env"
    parent.mkdir()
    argv = [sys.executable, "-m", "mcp_server.faces.cli", "install", "--branch", "main"]
    argv += ["--python", str(env), "--create-env", *bogus_repository(tmp_path)]
    clean = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    with contextlib.ExitStack() as env_lock:
        with locked_directory(parent):
            env.mkdir()  # made; its lock not taken yet
            other = subprocess.Popen(
                argv, env=clean, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            deadline = time.monotonic() + WAIT_S
            while other.poll() is None and not waits_on_flock(other.pid, parent):
                assert time.monotonic() < deadline, "the other install neither waited nor ended"
                time.sleep(0.01)
            blocked = other.poll() is None
            if blocked:  # the creator goes on: it takes the lock, then lets the parent go
                env_lock.enter_context(claim_lock(env))
        out, err = other.communicate(timeout=WAIT_S)
        assert blocked, f"the other install judged {env} without waiting for its creator: {err}"
        assert_in_use(CliResult(other.returncode, out, err), env)
    assert state(env)[1] == [".automl-setup", ".automl-setup/lock"]  # the other made nothing


def test_a_claimed_folder_is_in_use_to_every_command(tmp_path: Path) -> None:
    """Its lock held and no interpreter in it yet: each command that locates an environment
    says "in use" (who holds it, and to wait), and nothing in the folder changes."""
    env = tmp_path / "env"
    env.mkdir()
    with claim_lock(env):
        before = state(env)
        for args in (
            ["install", "--branch", "main", "--create-env", *bogus_repository(tmp_path)],
            ["install", "--branch", "main", *bogus_repository(tmp_path)],
            ["verify"],
            ["history"],
            ["repair"],
        ):
            result = run_cli(args[0], "--python", str(env), *args[1:])
            assert_in_use(result, env)
            assert state(env) == before, args


def assert_in_use(result: CliResult, env: Path) -> None:
    assert result.code == 1, result.output
    assert "not a virtual environment" not in result.stderr, result.output
    assert f"environment {env} is in use by another automl-setup process (pid {os.getpid()})" in (
        result.stderr
    ), result.output
    assert "remedy: wait for it to finish, then run the command again" in result.stderr


def test_a_claim_whose_creator_died_says_so_and_is_left_alone(tmp_path: Path) -> None:
    """The creator was killed between its claim and its venv (nobody holds the lock): not "not
    a venv" (automl-setup made it) and not "in use" (nobody is): remove it and create again."""
    env = tmp_path / "env"
    env.mkdir()
    with claim_lock(env):
        pass  # the lock file stays, as a killed creator leaves it
    before = state(env)
    for args in (
        ["install", "--branch", "main", "--create-env", *bogus_repository(tmp_path)],
        ["verify"],
    ):
        result = run_cli(args[0], "--python", str(env), *args[1:])
        assert result.code == 1, result.output
        assert "not a virtual environment" not in result.stderr, result.output
        assert f"{env} was claimed by an automl-setup --create-env that did not finish" in (
            result.stderr
        ), result.output
        assert f"remedy: remove it (rm -r {env}), then run the command again" in result.stderr
        assert state(env) == before, args
