"""Regenerates the MCP server's catalog, `mcp_catalog.json` beside this file: what `tools/list`,
`resources/list` and `resources/templates/list` answer.

The server answers those lists from the committed catalog until a call needs a tool or a
resource itself (`DeferredServer` in mcp_app.py): a client starting the server then waits for
the SDK's import, not for every area's models and 21 tools' schemas as well. `python -m
mcp_server.faces.mcp.catalog` rewrites the file from the registered tools; a test fails when the
committed catalog differs from what they publish.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

from mcp_server.faces.mcp.sdk import CATALOG_LISTS, CATALOG_PATH
from mcp_server.faces.mcp.server import server


def live_catalog() -> dict[str, list[dict[str, Any]]]:
    """What the registered tools and resources publish (registering them first)."""
    server.register_now()

    async def lists() -> tuple[list[Any], ...]:
        return (
            await server.list_tools(),
            await server.list_resources(),
            await server.list_resource_templates(),
        )

    published = anyio.run(lists)
    return {
        name: [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]
        for name, items in zip(CATALOG_LISTS, published, strict=True)
    }


def render(catalog: dict[str, list[dict[str, Any]]]) -> str:
    return json.dumps(catalog, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    CATALOG_PATH.write_text(render(live_catalog()), encoding="utf-8")
    print(CATALOG_PATH, file=sys.stderr)
