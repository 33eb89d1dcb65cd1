"""`automl-setup install` as its own process group, paused at a fault-injection point and killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import profile_args

from mcp_server.source.sourcerepo import SourceRepository


class Install:
    """`automl-setup install` as a separate process group, to be killed."""

    def __init__(
        self,
        repo: SourceRepository,
        env_dir: Path,
        work: Path,
        *,
        pause_at: str | None = None,
        branch: str = "dev/next",
    ) -> None:
        self.marker = work / f"paused-at-{pause_at}"
        self.tmpdir = work / "tmp"
        self.tmpdir.mkdir(exist_ok=True)
        self.log_path = work / f"install-{pause_at}.log"
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        env["TMPDIR"] = str(self.tmpdir)
        if pause_at is not None:
            env["AUTOML_SETUP_PAUSE_AT"] = pause_at
            env["AUTOML_SETUP_PAUSE_FILE"] = str(self.marker)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "mcp_server.faces.cli", "install", "--branch", branch),
                    *("--python", str(env_dir), *profile_args(repo)),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_paused(self, point: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not self.marker.exists():
            if self.proc.poll() is not None:
                pytest.fail(
                    f"install exited ({self.proc.returncode}) before {point}:\n{self.log()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"install never reached {point}:\n{self.log()}")
            time.sleep(0.02)
        assert self.marker.read_text() == point

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(timeout=60) == -signal.SIGKILL

    def work_dirs(self) -> list[Path]:
        return sorted(self.tmpdir.glob(f"automl-setup-work-{self.proc.pid}-*"))
