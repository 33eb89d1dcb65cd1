"""Anticipated failures and the exit code each one maps to."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    REFUSED = 1  # a refusal, a failed experiment, or a cancelled one
    INVALID_INPUT = 2
    SIGUSR1 = 138  # 128 + SIGUSR1: a SLURM job's warning before its time limit, state saved
    SIGINT = 130  # 128 + SIGINT: the controller stopped on Ctrl-C, state saved
    SIGTERM = 143  # 128 + SIGTERM: the controller stopped on SIGTERM, state saved
    SIGPIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (`| head`)


class EngineError(Exception):
    """An anticipated failure; `str()` is the message the CLI prints."""

    exit_code: ExitCode = ExitCode.REFUSED


class Refused(EngineError):
    """The request is well formed but the experiment's state forbids it."""


class InvalidInput(EngineError):
    """The request itself is malformed (manifest, id, arguments)."""

    exit_code = ExitCode.INVALID_INPUT


class CorruptState(Refused):
    """Files on disk are missing, unreadable or contradict each other."""
