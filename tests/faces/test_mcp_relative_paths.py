"""A relative path argument of an MCP tool is the client's, not the server's: it is read below
the client's first root, and refused (changing nothing) when the client declared none; never
resolved against the server's working directory, which nobody chose."""

from __future__ import annotations

from pathlib import Path

import mcp.types as types
import pytest
from mcp import Client
from mcp.client import ClientRequestContext
from support.mcp import call_ok, error_text
from support.trees import tree_digest

from mcp_server.faces.mcp.calls import anchored
from mcp_server.faces.mcp.server import server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def roots_of(*paths: Path) -> types.ListRootsResult:
    return types.ListRootsResult(
        roots=[types.Root(uri=path.as_uri(), name=path.name) for path in paths]  # type: ignore[arg-type]
    )


def test_a_relative_path_is_anchored_at_the_first_root_only(tmp_path: Path) -> None:
    first, second = tmp_path / "project", tmp_path / "other"
    assert anchored(roots_of(first, second), "workspace", "runs") == str(first / "runs")
    assert anchored(roots_of(first), "workspace", "/abs/runs") == "/abs/runs"
    assert anchored(None, "workspace", "/abs/runs") == "/abs/runs"


@pytest.fixture
def server_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's working directory, holding a `runs` of its own the tools must not see."""
    cwd = tmp_path / "server-cwd"
    (cwd / "runs").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    return cwd


async def test_a_relative_workspace_is_read_below_the_clients_root(
    tmp_path: Path, server_cwd: Path
) -> None:
    project = tmp_path / "project"
    (project / "runs").mkdir(parents=True)

    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        return roots_of(project)

    async with Client(server, list_roots_callback=roots) as client:
        listing = await call_ok(client, "list_experiments", {"workspace": "runs"})
    assert listing["workspace"] == str(project / "runs")


async def test_a_relative_path_without_roots_is_refused_and_nothing_changes(
    server_cwd: Path,
) -> None:
    before = tree_digest(server_cwd)
    args = {"manifest": "m.yaml", "workspace": "runs", "python": "/nonexistent/env"}
    async with Client(server) as client:
        refused = await client.call_tool("launch_experiment", args)
    text = error_text(refused, "launch_experiment")
    assert "manifest 'm.yaml' is a relative path" in text, text
    assert "pass an absolute path" in text
    assert tree_digest(server_cwd) == before and sorted(server_cwd.iterdir()) == [
        server_cwd / "runs"
    ]


async def test_a_relative_path_that_climbs_out_of_the_root_is_outside(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()

    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        return roots_of(project)

    async with Client(server, list_roots_callback=roots) as client:
        refused = await client.call_tool("list_experiments", {"workspace": "../elsewhere"})
    assert "outside the client's roots" in error_text(refused, "list_experiments")
    assert not (tmp_path / "elsewhere").exists()
