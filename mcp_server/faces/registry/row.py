"""A row of the registry: what one operation is made of, its exit-code rules, and the exit
codes every command shares."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from mcp_server.errors import ExitCode

ExitCodes = tuple[tuple[int | str, str], ...]

# The codes every command can return, and the one of a command that names a thing which may not
# be there (an environment, its engine, an experiment): derived from the request's fields.
COMMON_CODES: ExitCodes = (
    (ExitCode.OK, "ok"),
    (ExitCode.REFUSED, "refused, or a step failed (the message names the step and the remedy)"),
    (ExitCode.INVALID_INPUT, "invalid input"),
)
NOTHING_THERE: ExitCodes = (
    (ExitCode.NOTHING_INSTALLED, "nothing to act on: the environment, its engine or the "
     "experiment named does not exist"),
)  # fmt: skip
NAMES_A_THING = ("python", "experiment_id")
# 128 + the signal, as a shell reports a process the signal ended.
INTERRUPTED, PIPE_CLOSED = 130, 141
ALWAYS: ExitCodes = (
    (INTERRUPTED, "interrupted (Ctrl-C)"),
    (PIPE_CLOSED, "the output pipe was closed (`| head`): quietly"),
)


@dataclass(frozen=True)
class Hints:
    """The MCP tool annotations (what the client may assume of a call)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


# The tools that only read local files and processes: safe to call any time.
LOCAL_READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)


def always_ok(_result: Any) -> int:
    return int(ExitCode.OK)


def own_exit_code(result: Any) -> int:
    """The result's own `exit_code` (verify's report, a watch tick, a store action)."""
    return int(result.exit_code)


def engine_exit_code(result: Any) -> int:
    """A foreground engine's own exit code (None when detached)."""
    return int(result.exit_code or 0)


def healthy(result: Any) -> int:
    return int(ExitCode.OK if result.healthy else ExitCode.REFUSED)


def stopped(result: Any) -> int:
    return int(ExitCode.OK if result.stopped else ExitCode.REFUSED)


def all_readable(result: Any) -> int:
    return int(ExitCode.REFUSED if result.unreadable else ExitCode.OK)


@dataclass(frozen=True)
class Flag:
    """How the command line spells one request field where the rule (`--field-name`, its
    description as help, the request's default) does not fit."""

    name: str | None = None  # `--extra` for `extras`
    metavar: str | None = None
    positional: bool = False
    nargs: str | None = None  # "+": `--keep-bound A B`
    default: Any = None  # the command line's own default (resolve: main)
    help: str | None = None  # words of the command line's own (its default, its flag names)
    more: str | None = None  # given again: the values after the first go to this field


# The flag of every operation that reaches a repository or an index (requests.NetworkRequest).
STALL_FLAG = {"stall_timeout": Flag(metavar="SECONDS")}


@dataclass(frozen=True)
class Tool:
    """The MCP tool's description, and how the tool departs from the request: fields it sets
    itself (`detach=True`: a call returns at once), a hook adding fields to the reply
    (`"module:function"`, with the model of those fields), whether it asks the user for the
    branch (elicitation), and the steps of its progress notifications."""

    description: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    after: str | None = None
    extra: str | None = None
    asks_branch: bool = False
    steps: str | None = None  # the steps its progress counts through ("module:name")


@dataclass(frozen=True)
class Row:
    """One operation. `command` is also the operation's name (an `errors.Fix` names it);
    `cli_only`/`mcp_only` are the request fields one face does not take, and `why`. Its
    command's flags and its tool's arguments are made from the request's fields
    (`faces/cli/flags.py`, `faces/mcp/tools.py`): `flags` and `exclusive` say where the
    command line departs from the rule, `mcp` what the tool adds; `handler` names a command
    line handler of its own (`logs --follow`), else `run_operation` runs it."""

    command: str
    tool: str
    function: str
    request_model: str
    result_model: str
    renderer: str
    summary: str
    description: str
    example: str
    title: str
    hints: Hints
    exit_rule: Callable[[Any], int] = always_ok
    codes: ExitCodes = ()
    mcp: Tool = field(default_factory=lambda: Tool(""))  # every row gives its own
    flags: Mapping[str, Flag] = field(default_factory=dict)
    exclusive: tuple[tuple[str, ...], ...] = ()
    handler: str | None = None
    aliases: tuple[str, ...] = ()
    cli_only: frozenset[str] = frozenset()
    mcp_only: frozenset[str] = frozenset()
    why: str = ""

    @property
    def run(self) -> Callable[..., BaseModel]:
        found: Callable[..., BaseModel] = load_named(self.function)
        return found

    @property
    def request(self) -> type[BaseModel]:
        found: type[BaseModel] = load_named(self.request_model)
        return found

    @property
    def result(self) -> type[BaseModel]:
        found: type[BaseModel] = load_named(self.result_model)
        return found

    def render(self, result: BaseModel) -> str:
        """The text both faces show for this operation's result."""
        renderer: Callable[[Any], str] = load_named(self.renderer)
        return renderer(result)

    def exit_code(self, result: BaseModel) -> int:
        """The command line's exit code for a result (a refusal never gets here: it raised)."""
        return self.exit_rule(result)

    def exit_codes(self) -> ExitCodes:
        """Every exit code the command can return, with its meaning (its --help, the
        reference): the common ones, 3 when it names an environment or an experiment, its
        own, and those of an interrupted or piped command."""
        names_a_thing = any(f in self.request.model_fields for f in NAMES_A_THING)
        return (*COMMON_CODES, *(NOTHING_THERE if names_a_thing else ()), *self.codes, *ALWAYS)


def load_named(target: str) -> Any:
    """The object a `"module:name"` string names (imported now)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
