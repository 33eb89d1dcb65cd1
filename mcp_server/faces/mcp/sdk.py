"""Every use of the MCP SDK beyond its public API, in one place: the server that registers its
tools when a call first needs one (answering the lists from the committed catalog until then),
strict tool arguments, and tidy descriptions. An SDK upgrade is checked here
(tests/faces/test_startup.py checks what each patch relies on)."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, InputRequiredResult, Resource, ResourceTemplate, Tool
from pydantic import AnyUrl, ConfigDict

# What the lists a client asks for at start answer before any call (faces/mcp/catalog.py).
CATALOG_PATH = Path(__file__).resolve().parent / "catalog.json"
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


def forbid_unknown_arguments(server: MCPServer) -> None:
    """Every tool refuses an argument it does not declare (a `dry_run` it has no such thing
    as, a typo `create-env`) instead of ignoring it and doing the real thing. The SDK builds
    each tool's argument model from its signature with no hook for the model's config, so the
    registered model is replaced by a subclass with extra="forbid", and the published input
    schema closed the same way (`additionalProperties: false`, all that extra="forbid" changes
    in it). Start-up time: the subclass's validator is built on its first call, and the schema
    is not regenerated (tests/faces/test_startup.py checks it equals the regenerated one)."""
    for tool in server._tool_manager.list_tools():
        loose = tool.fn_metadata.arg_model
        config = ConfigDict(extra="forbid", defer_build=True)
        strict = type(loose.__name__, (loose,), {"model_config": config})
        tool.fn_metadata.arg_model = strict
        tool.parameters = {**tool.parameters, "additionalProperties": False}


def plain_description(docstring: str | None) -> str:
    """A docstring as a tool's description: no indentation, each paragraph one line."""
    paragraphs = inspect.cleandoc(docstring or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def tidy_descriptions(server: MCPServer) -> None:
    """The SDK publishes a tool's docstring as written, indentation and line breaks of the
    source included; clients show it to people and models as it comes."""
    for tool in server._tool_manager.list_tools():
        tool.description = plain_description(tool.description)
    for template in server._resource_manager.list_templates():
        template.description = plain_description(template.description)
