"""The MCP server instance and what every tool module shares: `tool` registers a tool under its
row's name, title and annotations (`faces/registry.py`), `call` runs its operation and makes its
reply (`Reply[Result]`: the operation's result plus the text the command line prints for it).
The tools live in `tools_*.py`, one module per area; `server.py` registers them all when the
first call needs them (`DeferredServer`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CallToolResult,
    InputRequiredResult,
    ListRootsResult,
    Resource,
    ResourceTemplate,
    Tool,
    ToolAnnotations,
)
from pydantic import AnyUrl, BaseModel, Field, create_model

from mcp_server import __version__
from mcp_server.errors import InvalidInput, shown
from mcp_server.faces.mcp_roots import STEP, check_roots, first_root
from mcp_server.faces.mcp_runtime import MonotonicProgress, run, worker_progress

INSTRUCTIONS = """\
Installs an AutoML core engine from source at an exact commit, verifies and records it, and runs
experiments bound to that exact build. Before install_engine, ask the user: "main, or which
development branch?" - never choose a branch yourself (the tool asks the user itself when the
client supports elicitation; list_branches offers the real choices). Show the commit
resolve_branch gives, and install that branch with expect_commit set to it. Omit `profile` to use
the project's engine (each reply's profile_source says which). Pass absolute paths. Resume
takes the exact experiment id (see list_experiments). A tool error is a refusal with its cause
and remedy: read it, do not retry blindly."""


# What the lists a client asks for at start answer before any call (faces/mcp_catalog.py).
CATALOG_PATH = Path(__file__).resolve().parent / "mcp_catalog.json"
CATALOG_LISTS = ("tools", "resources", "resource_templates")


@functools.cache
def read_catalog() -> dict[str, list[dict[str, Any]]]:
    """The committed catalog; every entry is validated by the SDK's own model when served."""
    catalog = json.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    if not isinstance(catalog, dict) or sorted(catalog) != sorted(CATALOG_LISTS):
        raise ValueError(f"{CATALOG_PATH}: expected exactly the lists {', '.join(CATALOG_LISTS)}")
    return catalog


class DeferredServer(MCPServer):
    """An MCPServer that registers its tools and resources when a call first needs one.
    Until then the lists a client asks for at start answer from the committed catalog
    (faces/mcp_catalog.py, kept equal to the registered tools by a test), so starting the
    server costs the SDK's import, not every area's as well."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._register: Callable[[], None] | None = None

    def register_on_first_use(self, register: Callable[[], None]) -> None:
        self._register = register

    def register_now(self) -> None:
        if self._register is not None:
            self._register()  # should it fail, every call says so and the lists stay the catalog
            self._register = None

    # Listed by name: the order tools register in is the order their modules were first
    # imported, which the catalog cannot know.
    async def list_tools(self) -> list[Tool]:
        if self._register is None:
            return sorted(await super().list_tools(), key=lambda tool: tool.name)
        return [Tool.model_validate(tool) for tool in read_catalog()["tools"]]

    async def list_resources(self) -> list[Resource]:
        if self._register is None:
            return sorted(await super().list_resources(), key=lambda item: item.name)
        return [Resource.model_validate(item) for item in read_catalog()["resources"]]

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        if self._register is None:
            templates = await super().list_resource_templates()
            return sorted(templates, key=lambda template: template.name)
        return [ResourceTemplate.model_validate(t) for t in read_catalog()["resource_templates"]]

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        self.register_now()  # the SDK validates a call's arguments before it runs the tool
        return super()._tool_input_schema(name)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        self.register_now()
        return await super().call_tool(name, arguments, context)

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        self.register_now()
        return await super().read_resource(uri, context)


server = DeferredServer("automl-setup", version=__version__, instructions=INSTRUCTIONS)

Message = Annotated[str, Field(description="The text `automl-setup` prints for the same call.")]


class Reply:
    """`Reply[Result]` (or `Reply[Result, Extra]`): a tool's structured result, the operation's
    result model with `message`, the text the command line prints for it (and the fields of
    `Extra`). One model per result type, made once; the SDK publishes it as the output schema."""

    def __class_getitem__(cls, bases: Any) -> type[BaseModel]:
        return reply_model(*(bases if isinstance(bases, tuple) else (bases,)))


@functools.cache
def reply_model(*bases: type[BaseModel]) -> type[BaseModel]:
    fields: Any = {"message": (Message, ...)}
    return create_model(f"{bases[0].__name__}Reply", __base__=bases, **fields)


ToolT = TypeVar("ToolT", bound=Callable[..., Any])


def tool(command: str) -> Callable[[ToolT], ToolT]:
    """Register the decorated function as the MCP tool of operation `command`: the tool's
    name, title and annotations are its row's."""
    from mcp_server.faces.registry import row

    op = row(command)
    annotations = ToolAnnotations(
        title=op.title,
        read_only_hint=op.hints.read_only,
        destructive_hint=op.hints.destructive,
        idempotent_hint=op.hints.idempotent,
        open_world_hint=op.hints.open_world,
    )
    register: Callable[[ToolT], ToolT] = server.tool(
        name=op.tool, title=op.title, annotations=annotations
    )
    return register


async def call(
    ctx: Context,
    roots: ListRootsResult | None,
    command: str,
    *,
    tracker: MonotonicProgress | None = None,
    after: Callable[[Any, Any], dict[str, Any]] | None = None,
    extra: type[BaseModel] | None = None,
    **arguments: Any,
) -> Any:
    """Run operation `command` for a tool: its path arguments anchored and checked against the
    client's roots, `profile` resolved (over the project file found from the first root), the
    request built and the operation run in a worker thread (progress through `tracker`), its
    reply made from the result, `after(request, result)`'s fields (of model `extra`) and the
    rendered message."""
    from mcp_server.faces.mcp_inputs import engine_profile
    from mcp_server.faces.registry import row
    from mcp_server.faces.registry.fields import build_request, shapes

    op = row(command)

    def work() -> BaseModel:
        for shape in shapes(op.request):
            value = arguments.get(shape.name)
            if shape.kind is not None and shape.kind.path and value:
                values = tuple(anchored(roots, shape.name, v) for v in _many(value))
                arguments[shape.name] = values if shape.repeated else values[0]
                for one in values:  # `keep_bound` holds workspaces
                    check_roots(roots, **{ROOTS_ARGUMENT.get(shape.name, shape.name): one})
        if "profile" in arguments:
            profile = arguments["profile"]
            if profile is not None and profile.file:
                profile = profile.model_copy(
                    update={"file": anchored(roots, "profile.file", profile.file)}
                )
                check_roots(roots, profile_file=profile.file)
            arguments["profile"] = engine_profile(profile, roots)
        request = build_request(op.request, arguments)
        progress = () if tracker is None else (worker_progress(tracker),)
        result = op.run(request, *progress)
        added = after(request, result) if after else {}
        fields = {**result.model_dump(), **added, "message": op.render(result)}
        return reply_model(op.result, *((extra,) if extra else ())).model_validate(fields)

    return await run(ctx, work, tracker)


# The argument of check_roots a path field is judged as (a workspace of `keep_bound`).
ROOTS_ARGUMENT = {"keep_bound": "workspace"}


def _many(value: Any) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def anchored(roots: ListRootsResult | None, name: str, value: str) -> str:
    """A path argument made absolute: as given when it is, else below the client's first local
    root (the user's project); never the server's working directory, which is nobody's
    choice. Refused when it is relative and the client declared no root."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return value
    base = first_root(roots)
    if base is None:
        raise InvalidInput(
            STEP,
            f"{name} {shown(value, 100)} is a relative path, and the client declared no root it "
            "could be relative to; nothing was touched",
            "pass an absolute path",
        )
    return str(base / path)
