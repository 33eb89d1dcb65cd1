"""What git is started with: every argv of every git process of a resolve and an install is
logged by a shim on PATH that then runs the real git."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from support.cli import profile_args, run_cli

from mcp_server.source.sourcerepo import SourceRepository

SECRET = "s3cr3t-T0KEN-in-argv"


@pytest.fixture
def git_log(tmp_path: Path) -> tuple[dict[str, str], Path]:
    real_git = shutil.which("git")
    assert real_git
    shim_dir = tmp_path / "shim"
    shim_dir.mkdir()
    log = tmp_path / "git-argv.log"
    shim = shim_dir / "git"
    shim.write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do printf "%s\\037" "$a" >> "{log}"; done\n'
        f'printf "\\n" >> "{log}"\n'
        f'exec "{real_git}" "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{shim_dir}{os.pathsep}{os.environ['PATH']}"}
    return env, log


def _calls(log: Path) -> list[list[str]]:
    return [line.split("\x1f")[:-1] for line in log.read_text().splitlines()]


def test_a_credentialed_url_never_reaches_a_git_command_line(
    tmp_path: Path, git_log: tuple[dict[str, str], Path]
) -> None:
    env, log = git_log
    url = f"https://user:{SECRET}@127.0.0.1:9/org/repo.git"
    result = run_cli("resolve", "--branch", "main", "--repository", url, env=env)
    assert result.code == 1 and "resolve" in result.stderr
    assert SECRET not in result.output
    calls = _calls(log)
    assert any("ls-remote" in call for call in calls), calls
    assert all(SECRET not in arg for call in calls for arg in call)


@pytest.mark.slow
def test_every_user_value_follows_end_of_options(
    tmp_path: Path, source_repo: SourceRepository, git_log: tuple[dict[str, str], Path]
) -> None:
    env, log = git_log
    target = tmp_path / "env"
    result = run_cli(
        "install", "--branch", "dev/next", "--python", str(target), "--create-env",
        *profile_args(source_repo), env=env,
    )  # fmt: skip
    assert result.code == 0, result.output
    calls = _calls(log)
    for name in ("ls-remote", "fetch"):
        call = next(c for c in calls if name in c)
        # The branch ref and the commit come only after --end-of-options.
        marker = call.index("--end-of-options")
        user_values = [a for a in call if a.startswith(("refs/heads/dev/next",)) or len(a) == 40]
        assert user_values and all(call.index(v) > marker for v in user_values), call
    assert all(source_repo.url not in arg for call in calls for arg in call)
