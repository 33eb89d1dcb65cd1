"""The one error type every face shows the same way: step, cause, remedy, exit code."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum


def shown(value: object, limit: int = 40) -> str:
    """An untrusted value for an error message: quoted, and cut short (never echoed whole)."""
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:limit] + "…" if len(text) > limit else text)


class ExitCode(IntEnum):
    OK = 0
    REFUSED = 1  # a step failed or a check refused
    INVALID_INPUT = 2
    NOTHING_INSTALLED = 3

    def __str__(self) -> str:
        # The number, as IntEnum's own str() is from Python 3.11 on (3.10's: "ExitCode.OK"), so
        # that a help text or message says the same on every version.
        return str(int(self))


@dataclass(frozen=True)
class Fix:
    """A remedy that is a call of one operation: its command (a row of `faces/registry.py`) and
    arguments by request field name, in order (True: a flag; False or None: left out). Each
    face names it its own way: the command line as a command, the MCP face as a tool call."""

    operation: str
    arguments: tuple[tuple[str, str | bool | None], ...] = ()


@dataclass(frozen=True)
class Arg:
    """An argument a remedy's prose names, by request field name: `--name VALUE` on the command
    line, `name=VALUE` in a tool call."""

    name: str
    value: str = ""


Remedy = str | Sequence[str | Fix | Arg]  # prose, or prose, calls and arguments, in order
RenderFix = Callable[[Fix | Arg], str]


def command_line(fix: Fix | Arg) -> str:
    """The command line's rendering of a fix (the exact `automl-setup` command) or of an
    argument (its flag)."""
    if isinstance(fix, Arg):
        return " ".join(filter(None, ("--" + fix.name.replace("_", "-"), fix.value)))
    argv = ["automl-setup", *fix.operation.split()]  # "slurm watch register": three words
    for name, value in fix.arguments:
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value not in (False, None):
            argv += [flag, str(value)]
    return shlex.join(argv)


class SetupError(Exception):
    """An anticipated failure. `str()` is the one-or-two-line message both faces print.

    The remedy is required: every refusal tells the user what to do next. A remedy that names
    a call holds it as a `Fix`, so that each face renders it in its own terms (`full_text`)."""

    def __init__(
        self,
        step: str,
        cause: str,
        remedy: Remedy,
        exit_code: ExitCode = ExitCode.REFUSED,
        details: list[str] | None = None,
    ) -> None:
        from mcp_server.redact import redact_text

        self.step = step
        self.cause = redact_text(cause)
        self.remedy_parts: tuple[str | Fix | Arg, ...] = (
            (remedy,) if isinstance(remedy, str) else tuple(remedy)
        )
        self.remedy = self.remedy_text(command_line)
        self.exit_code = exit_code
        self.details = [redact_text(d) for d in details or []]
        super().__init__(self.message)

    @property
    def fixes(self) -> list[Fix]:
        return [part for part in self.remedy_parts if isinstance(part, Fix)]

    def remedy_text(self, render: RenderFix) -> str:
        from mcp_server.redact import redact_text

        parts = (part if isinstance(part, str) else render(part) for part in self.remedy_parts)
        return redact_text("".join(parts))

    @property
    def message(self) -> str:
        return f"{self.step}: {self.cause}\n  remedy: {self.remedy}"

    def full_text(self, render: RenderFix | None = None) -> str:
        """The message plus any itemised details (field diffs and the like); `render` names
        the remedy's calls in a face's own terms (default: the command line's)."""
        remedy = self.remedy if render is None else self.remedy_text(render)
        lines = [f"{self.step}: {self.cause}\n  remedy: {remedy}"]
        lines += [f"  - {d}" for d in self.details]
        return "\n".join(lines)


class InvalidInput(SetupError):
    def __init__(self, step: str, cause: str, remedy: Remedy) -> None:
        super().__init__(step, cause, remedy, ExitCode.INVALID_INPUT)
