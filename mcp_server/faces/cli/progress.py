"""Progress on the command line, on stderr, never with --json: a line per install step, plus
on a terminal a heartbeat every few seconds during the long steps (build, the uv install); a
foreground launch or resume gets the engine's "trial n of N" lines as they change."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

from mcp_server.environment.transaction import STEPS

# The steps that can take minutes (uv build, uv pip install): a person at a terminal is told
# that they still run. Tests shorten the interval with AUTOML_SETUP_HEARTBEAT_S.
LONG_STEPS = frozenset({"build", "install"})
HEARTBEAT_S = 5.0


def heartbeat_interval() -> float:
    try:
        return max(0.1, float(os.environ.get("AUTOML_SETUP_HEARTBEAT_S", HEARTBEAT_S)))
    except ValueError:
        return HEARTBEAT_S


class CliProgress:
    """The core's `progress(step, message)` callback for one command; `close()` ends it."""

    def __init__(
        self, enabled: bool, stream: TextIO | None = None, steps: tuple[str, ...] = STEPS
    ) -> None:
        self.stream = stream or sys.stderr
        self.steps = steps
        self.enabled = enabled
        self.terminal = enabled and self.stream.isatty()
        self.every = heartbeat_interval()
        self.lock = threading.Lock()
        self.step = ""
        self.since = time.monotonic()
        self.done = threading.Event()
        self.beat: threading.Thread | None = None

    def _print(self, line: str) -> None:
        with self.lock:
            if not self.enabled:
                return
            try:
                print(line, file=self.stream, flush=True)
            except BrokenPipeError:  # `2>&1 | head`: a closed pipe never stops an install
                self.enabled = False

    def _where(self, step: str) -> str:
        if step not in self.steps or len(self.steps) < 2:
            return ""
        return f"{self.steps.index(step) + 1}/{len(self.steps)} "

    def __call__(self, step: str, message: str) -> None:
        if not self.enabled:
            return
        with self.lock:
            self.step, self.since = step, time.monotonic()
        self._print(f"[{self._where(step)}{step}] {message}")
        if self.terminal and step in LONG_STEPS and self.beat is None:
            self.beat = threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True)
            self.beat.start()

    def _heartbeat(self) -> None:
        while not self.done.wait(self.every):
            with self.lock:
                step, since = self.step, self.since
            if step in LONG_STEPS:
                self._print(
                    f"[{self._where(step)}{step}] still running, {time.monotonic() - since:.0f} s"
                )

    def close(self) -> None:
        self.done.set()
        if self.beat is not None:
            self.beat.join()
