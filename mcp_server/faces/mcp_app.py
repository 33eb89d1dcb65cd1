"""The MCP server instance and what every tool module shares: how a reply is made (an
operation's result plus the text the command line prints for it) and the hints of read-only
tools. The tools live in `tools_*.py`, one module per area; `server.py` registers them all
when the first call needs them (`DeferredServer`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, InputRequiredResult, Resource, ResourceTemplate, Tool
from pydantic import AnyUrl, BaseModel, Field

from mcp_server import __version__

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

ReplyT = TypeVar("ReplyT", bound=BaseModel)


def reply(cls: type[ReplyT], operation: str, result: BaseModel, **extra: Any) -> ReplyT:
    """The tool's structured result: the operation's result, `extra`, and its message."""
    from mcp_server.faces import messages  # every area's renderers: imported by the first call

    return cls.model_validate(
        {**result.model_dump(), **extra, "message": messages.render(operation, result)}
    )


# The hints of the tools that only read local files and processes: safe to call any time.
LOCAL_READ = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}
