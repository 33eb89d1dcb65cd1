"""A row of the registry: what one operation is made of, its exit-code rules, and the exit
codes every command shares. A row refers to its operation's function, models and renderer
through a small typed function that imports them when called (`Operation`), so a command imports
only what it runs and a type checker still sees, and checks, every link."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from mcp_server.errors import ExitCode

ExitCodes = tuple[tuple[int | str, str], ...]
Progress = Callable[[str, str], None]  # (step, message), as every reporting operation takes it
RequestT = TypeVar("RequestT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)
RequestT_contra = TypeVar("RequestT_contra", bound=BaseModel, contravariant=True)
ResultT_co = TypeVar("ResultT_co", bound=BaseModel, covariant=True)

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


class Runs(Protocol[RequestT_contra, ResultT_co]):
    """An operation's function: its request in, its result out."""

    def __call__(self, request: RequestT_contra, /) -> ResultT_co: ...


class Reports(Protocol[RequestT_contra, ResultT_co]):
    """An operation's function that also reports its steps, when it is given a callback."""

    def __call__(self, request: RequestT_contra, progress: Progress = ..., /) -> ResultT_co: ...


@dataclass(frozen=True)
class Operation(Generic[RequestT, ResultT]):
    """What a row's typed loader returns, its area imported: the function (`reporting` when it
    takes a progress callback, with the steps it counts through when it names them), the result
    model and the renderer both faces show the result with. The type checker checks that the
    function takes the row's request and the renderer takes the result."""

    function: Runs[RequestT, ResultT]
    result: type[ResultT]
    render: Callable[[ResultT], str]
    reporting: Reports[RequestT, ResultT] | None = None
    steps: tuple[str, ...] | None = None


def reporting(
    function: Reports[RequestT, ResultT],
    result: type[ResultT],
    render: Callable[[ResultT], str],
    steps: tuple[str, ...] | None = None,
) -> Operation[RequestT, ResultT]:
    """The `Operation` of a function that reports its steps to a progress callback."""
    return Operation(function, result, render, function, steps)


class HasExitCode(Protocol):
    @property
    def exit_code(self) -> int: ...


class MayHaveExitCode(Protocol):
    @property
    def exit_code(self) -> int | None: ...


class Judged(Protocol):
    @property
    def healthy(self) -> bool: ...


class Stopping(Protocol):
    @property
    def stopped(self) -> bool: ...


class Listing(Protocol):
    @property
    def unreadable(self) -> list[Any]: ...


def always_ok(_result: BaseModel) -> int:
    return int(ExitCode.OK)


def own_exit_code(result: HasExitCode) -> int:
    """The result's own `exit_code` (verify's report, a watch tick, a store action)."""
    return int(result.exit_code)


def engine_exit_code(result: MayHaveExitCode) -> int:
    """A foreground engine's own exit code (None when detached)."""
    return int(result.exit_code or 0)


def healthy(result: Judged) -> int:
    return int(ExitCode.OK if result.healthy else ExitCode.REFUSED)


def stopped(result: Stopping) -> int:
    return int(ExitCode.OK if result.stopped else ExitCode.REFUSED)


def all_readable(result: Listing) -> int:
    return int(ExitCode.REFUSED if result.unreadable else ExitCode.OK)


@dataclass(frozen=True)
class Hints:
    """The MCP tool annotations (what the client may assume of a call)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


# The tools that only read local files and processes: safe to call any time.
LOCAL_READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)


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
    itself (`detach=True`: a call returns at once) and whether it asks the user for the branch
    (elicitation). What a tool adds to its reply is the MCP face's own (`faces/mcp/tools.py`)."""

    description: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    asks_branch: bool = False


@dataclass(frozen=True, kw_only=True)
class Row(Generic[RequestT, ResultT]):
    """One operation. `command` is also the operation's name (an `errors.Fix` names it);
    `load_request` returns its request model (imported when the command is parsed: most are
    in requests.py, which every command imports) and `operation` imports and returns its
    function, result model and renderer (`Operation`, when it runs), and the type checker
    checks that they fit each other and the `exit_rule`; `cli_only`/`mcp_only` are the
    request fields one face does not take, and `why`. Its command's flags and its tool's
    arguments are made from the request's fields (`faces/cli/flags.py`, `faces/mcp/tools.py`):
    `flags` and `exclusive` say where the command line departs from the rule, `mcp` what the
    tool adds."""

    command: str
    tool: str
    load_request: Callable[[], type[RequestT]]
    operation: Callable[[], Operation[RequestT, ResultT]]
    summary: str
    description: str
    example: str
    title: str
    hints: Hints
    mcp: Tool
    exit_rule: Callable[[ResultT], int] = always_ok
    codes: ExitCodes = ()
    flags: Mapping[str, Flag] = field(default_factory=dict)
    exclusive: tuple[tuple[str, ...], ...] = ()
    aliases: tuple[str, ...] = ()
    cli_only: frozenset[str] = frozenset()
    mcp_only: frozenset[str] = frozenset()
    why: str = ""

    @property
    def request(self) -> type[RequestT]:
        return self.load_request()

    @property
    def result(self) -> type[ResultT]:
        return self.operation().result

    @property
    def steps(self) -> tuple[str, ...] | None:
        """The steps its progress counts through, when it names them."""
        return self.operation().steps

    @property
    def reports_progress(self) -> bool:
        return self.operation().reporting is not None

    def run(self, request: RequestT, progress: Progress | None = None) -> ResultT:
        """The operation's result for `request`, its steps reported to `progress` if given."""
        operation = self.operation()
        if progress is not None and operation.reporting is not None:
            return operation.reporting(request, progress)
        return operation.function(request)

    def render(self, result: ResultT) -> str:
        """The text both faces show for this operation's result."""
        return self.operation().render(result)

    def exit_code(self, result: ResultT) -> int:
        """The command line's exit code for a result (a refusal never gets here: it raised)."""
        return self.exit_rule(result)

    def exit_codes(self) -> ExitCodes:
        """Every exit code the command can return, with its meaning (its --help, the
        reference): the common ones, 3 when it names an environment or an experiment, its
        own, and those of an interrupted or piped command."""
        names_a_thing = any(f in self.request.model_fields for f in NAMES_A_THING)
        return (*COMMON_CODES, *(NOTHING_THERE if names_a_thing else ()), *self.codes, *ALWAYS)
