"""The automl-setup command line as a real process, and the flags and environment a test
runs it with."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mcp_server.source.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    SourceRepository,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    whole_env: bool = False,
) -> CliResult:
    """`automl-setup ARGS` as a real process (the installed console script's module). `env`
    adds to this process's environment, or with `whole_env` is all of it (a client's own)."""
    # A VIRTUAL_ENV inherited from the developer's shell must not pick the target for a test.
    full_env = {} if whole_env else {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_server.faces.cli", *args],
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


def outside_env() -> dict[str, str]:
    """The environment of a process run as a user would: no VIRTUAL_ENV of the developer's."""
    return {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}


def closed_pipe_run(
    *argv: str, env: dict[str, str] | None = None, stderr_too: bool = False
) -> tuple[int, str]:
    """argv with its stdout (and stderr) a pipe whose reader is already gone: the first write
    fails. Returns the exit code and what reached stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [*argv], stdout=write_end, stderr=write_end if stderr_too else subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True, timeout=300, check=False, env=env,
        )  # fmt: skip
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr or ""
