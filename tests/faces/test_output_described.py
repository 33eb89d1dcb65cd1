"""Every output field of every tool is described: an agent reading a tool's output schema is
never left to guess what a field means. Checked on the schemas the MCP face publishes, read
through the real MCP client, nested models included."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from pydantic import BaseModel, Field

from mcp_server.faces.mcp.calls import reply_model
from mcp_server.faces.mcp.server import server
from mcp_server.faces.registry import ROWS


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def undescribed(schema: dict[str, Any]) -> list[str]:
    """Every property of `schema` and of the models it refers to that has no description, as
    `Model.field` (each model once)."""
    definitions = schema.get("$defs", {})
    found: list[str] = []
    seen: set[str] = set()

    def model(name: str, node: dict[str, Any]) -> None:
        for field, prop in node.get("properties", {}).items():
            if not prop.get("description"):
                found.append(f"{name}.{field}")
            for ref in refs(prop):
                if ref not in seen:
                    seen.add(ref)
                    model(ref, definitions[ref])

    model(schema.get("title", "?"), schema)
    return found


def refs(node: Any) -> list[str]:
    """The models a property refers to, at any depth (lists, optionals, maps)."""
    if isinstance(node, list):
        return [ref for item in node for ref in refs(item)]
    if not isinstance(node, dict):
        return []
    own = [node["$ref"].rpartition("/")[2]] if "$ref" in node else []
    return own + [ref for value in node.values() for ref in refs(value)]


@pytest.mark.anyio
async def test_every_output_field_of_every_tool_is_described() -> None:
    server.register_now()  # the schemas the registered tools publish, not the catalog's copy
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {op.tool for op in ROWS}
    missing = {}
    for name, tool in sorted(tools.items()):
        assert tool.output_schema is not None, name
        assert tool.output_schema.get("properties"), name  # else nothing below is checked
        missing[name] = undescribed(tool.output_schema)
    assert {name: fields for name, fields in missing.items() if fields} == {}


def test_an_undescribed_field_is_found_in_a_nested_model_too() -> None:
    """The walk the test above relies on finds a field without a description in the reply
    itself, in a model it nests, in a list of models and behind an optional."""

    class Inner(BaseModel):
        said: str = Field(description="Described.")
        bare: int

    class Outer(BaseModel):
        top: str
        one: Inner = Field(description="A nested model.")
        many: list[Inner] = Field(description="A list of them.")
        maybe: Inner | None = Field(description="An optional one.")

    schema = reply_model(Outer).model_json_schema()
    assert undescribed(schema) == ["OuterReply.top", "Inner.bare"]
