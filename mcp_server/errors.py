"""The one error type every face shows the same way: step, cause, remedy, exit code."""

from __future__ import annotations

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


class SetupError(Exception):
    """An anticipated failure. `str()` is the one-or-two-line message both faces print.

    The remedy is required: every refusal tells the user what to do next."""

    def __init__(
        self,
        step: str,
        cause: str,
        remedy: str,
        exit_code: ExitCode = ExitCode.REFUSED,
        details: list[str] | None = None,
    ) -> None:
        from mcp_server.redact import redact_text

        self.step = step
        self.cause = redact_text(cause)
        self.remedy = redact_text(remedy)
        self.exit_code = exit_code
        self.details = [redact_text(d) for d in details or []]
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.step}: {self.cause}\n  remedy: {self.remedy}"

    def full_text(self) -> str:
        """The message plus any itemised details (field diffs and the like)."""
        lines = [self.message, *(f"  - {d}" for d in self.details)]
        return "\n".join(lines)


class InvalidInput(SetupError):
    def __init__(self, step: str, cause: str, remedy: str) -> None:
        super().__init__(step, cause, remedy, ExitCode.INVALID_INPUT)
