"""MCP roots: the pure confinement check, then the tools through the real SDK client (in
process and over stdio) with roots, with changed roots and without roots."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.engines import make_venv
from support.mcp import MODES, Roots, call_ok, error_text, write_manifest
from support.trees import tree_digest

from mcp_server.faces.mcp.roots import environment_of, inside_roots, root_path
from mcp_server.faces.mcp.server import server

pytestmark = pytest.mark.anyio
BIN = Path(sys.executable).parent
# A repository that is never reached: every call below is refused before anything runs.
NOWHERE = {"repository": "file:///nonexistent/engine.git"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """inside/ (the root), outside/ beside it, and a symlink from inside to outside."""
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours\n")
    (inside / "escape").symlink_to(outside)
    return {"root": tmp_path, "inside": inside, "outside": outside}


# --------------------------------------------------------------------------------------------
# The check itself, without any transport


def test_paths_inside_a_root_are_inside(tree: dict[str, Path]) -> None:
    inside = tree["inside"]
    assert inside_roots(inside, [inside])
    assert inside_roots(inside / "ws" / "not-yet", [inside])  # to be created
    assert inside_roots(inside / "a" / ".." / "b", [tree["outside"], inside])


def test_paths_outside_every_root_are_outside(tree: dict[str, Path]) -> None:
    inside = tree["inside"]
    assert not inside_roots(tree["outside"] / "ws", [inside])
    assert not inside_roots(tree["root"], [inside])  # a root's parent
    assert not inside_roots(str(inside) + "-other", [inside])  # a name sharing the prefix
    assert not inside_roots(inside / ".." / "outside", [inside])
    assert not inside_roots(inside, [])


def test_a_symlink_that_escapes_is_outside(tree: dict[str, Path]) -> None:
    inside = tree["inside"]
    assert not inside_roots(inside / "escape", [inside])
    assert not inside_roots(inside / "escape" / "new-env", [inside])  # not there yet
    assert not inside_roots(inside / "escape" / ".." / "inside", [tree["outside"]])
    (inside / "loop").symlink_to(inside / "loop")
    assert not inside_roots(inside / "loop", [inside])


def test_a_root_that_is_a_symlink_names_its_target(tree: dict[str, Path]) -> None:
    alias = tree["root"] / "alias"
    alias.symlink_to(tree["outside"])
    assert inside_roots(tree["outside"] / "ws", [alias])
    assert inside_roots(alias / "ws", [tree["outside"]])
    assert not inside_roots(tree["inside"], [alias])


def test_root_uris_name_local_directories() -> None:
    assert root_path("file:///home/u/my%20work") == Path("/home/u/my work")
    assert root_path("file://localhost/srv") == Path("/srv")
    assert root_path("file://elsewhere/srv") is None


def test_an_interpreter_is_judged_by_the_environment_it_runs_in(tree: dict[str, Path]) -> None:
    venv = make_venv(tree["outside"] / "venv")
    assert environment_of(str(venv / "bin" / "python")) == venv
    assert environment_of(str(venv)) == venv
    # A symlink to that interpreter runs as its base Python, not in the venv.
    link = tree["inside"] / "python"
    link.symlink_to(venv / "bin" / "python")
    assert environment_of(str(link)) == link
    assert not inside_roots(environment_of(str(link)), [tree["inside"]])


# --------------------------------------------------------------------------------------------
# Through the SDK client, in process


def refused(result: types.CallToolResult, tool: str, *names: str) -> str:
    text = error_text(result, tool)
    assert text.startswith("check roots: "), text
    assert "outside the client's roots" in text and "nothing was touched" in text, text
    for name in names:
        assert name in text, (name, text)
    return text


@pytest.mark.parametrize("mode", MODES)
async def test_paths_inside_the_roots_are_accepted(mode: str, tree: dict[str, Path]) -> None:
    inside = tree["inside"]
    venv = make_venv(inside / "venv")
    roots = Roots(inside)
    async with Client(server, mode=mode, list_roots_callback=roots) as client:
        listing = await call_ok(client, "list_experiments", {"workspace": str(inside / "ws")})
        assert listing["experiments"] == []
        for python in (venv, venv / "bin" / "python"):
            found = await call_ok(client, "diagnose_engine", {"python": str(python)})
            assert Path(found["environment"]) == venv
    assert roots.asked == 3  # every call asks: a change is never missed


@pytest.mark.parametrize("mode", MODES)
async def test_a_path_outside_the_roots_is_refused_and_nothing_made(
    mode: str, tree: dict[str, Path]
) -> None:
    inside, outside = tree["inside"], tree["outside"]
    manifest = write_manifest(inside, "roots-exp")
    before = tree_digest(tree["root"])
    async with Client(server, mode=mode, list_roots_callback=Roots(inside)) as client:
        install = {
            "python": str(outside / "new-env"),
            "create_env": True,
            "branch": "main",
            "profile": NOWHERE,
        }
        result = await client.call_tool("install_engine", install)
        refused(result, "install_engine", f"python {outside / 'new-env'}", inside.as_uri())

        launch = {
            "manifest": str(manifest),
            "workspace": str(outside / "ws"),
            "python": str(inside / "venv"),
        }
        result = await client.call_tool("launch_experiment", launch)
        text = refused(result, "launch_experiment", f"workspace {outside / 'ws'}")
        assert "manifest " not in text  # the manifest, inside, is not named

        profile = {"file": str(outside / "secret.txt")}
        result = await client.call_tool("resolve_branch", {"branch": "main", "profile": profile})
        refused(result, "resolve_branch", f"profile.file {outside / 'secret.txt'}")
    assert tree_digest(tree["root"]) == before
    assert not (outside / "new-env").exists() and not (outside / "ws").exists()


@pytest.mark.parametrize("mode", MODES)
async def test_a_symlink_escaping_the_roots_is_refused(mode: str, tree: dict[str, Path]) -> None:
    inside, outside = tree["inside"], tree["outside"]
    venv = make_venv(outside / "venv")
    (inside / "python").symlink_to(venv / "bin" / "python")
    (inside / "manifest.yaml").symlink_to(write_manifest(outside, "roots-exp"))
    before = tree_digest(tree["root"])
    async with Client(server, mode=mode, list_roots_callback=Roots(inside)) as client:
        escaping = inside / "escape" / "new-env"
        install = {"python": str(escaping), "create_env": True, "branch": "main"}
        result = await client.call_tool("install_engine", {**install, "profile": NOWHERE})
        refused(result, "install_engine", f"python {escaping} (resolves to {outside / 'new-env'})")

        result = await client.call_tool("history_engine", {"python": str(inside / "python")})
        refused(result, "history_engine", f"python {inside / 'python'} (resolves to ")

        launch = {
            "manifest": str(inside / "manifest.yaml"),
            "workspace": str(inside / "escape" / "ws"),
            "python": str(inside / "python"),
        }
        result = await client.call_tool("launch_experiment", launch)
        refused(result, "launch_experiment", "python ", "workspace ", "manifest ")
    assert tree_digest(tree["root"]) == before
    assert not (outside / "new-env").exists() and not (outside / "ws").exists()


@pytest.mark.parametrize("mode", MODES)
async def test_a_roots_change_is_honoured(mode: str, tree: dict[str, Path]) -> None:
    inside, outside = tree["inside"], tree["outside"]
    roots = Roots(inside)
    async with Client(server, mode=mode, list_roots_callback=roots) as client:
        there = {"workspace": str(outside / "ws")}
        refused(await client.call_tool("list_experiments", there), "list_experiments")
        roots.paths = [outside]
        await client.send_roots_list_changed()
        assert (await call_ok(client, "list_experiments", there))["experiments"] == []
        here = {"workspace": str(inside / "ws")}
        result = await client.call_tool("list_experiments", here)
        refused(result, "list_experiments", f"workspace {inside / 'ws'}", outside.as_uri())


@pytest.mark.parametrize("mode", MODES)
async def test_without_roots_any_path_is_as_before(mode: str, tree: dict[str, Path]) -> None:
    outside = tree["outside"]
    venv = make_venv(outside / "venv")
    for client_roots in (None, Roots()):  # no capability; or the capability and no root
        async with Client(server, mode=mode, list_roots_callback=client_roots) as client:
            listing = await call_ok(client, "list_experiments", {"workspace": str(outside)})
            assert listing["experiments"] == []
            link = tree["inside"] / "escape" / "venv"
            found = await call_ok(client, "diagnose_engine", {"python": str(link)})
            assert Path(found["environment"]).resolve() == venv.resolve()


# --------------------------------------------------------------------------------------------
# Over real stdio


@asynccontextmanager
async def stdio(cwd: Path, roots: Roots, mode: str) -> AsyncIterator[Client]:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    params = StdioServerParameters(command=str(BIN / "automl-setup-mcp"), cwd=str(cwd), env=env)
    with (cwd / "server-stderr.log").open("w") as errlog:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, mode=mode, list_roots_callback=roots) as client:
            yield client


@pytest.mark.parametrize("mode", MODES)
async def test_roots_over_stdio(mode: str, tree: dict[str, Path], tmp_path: Path) -> None:
    inside, outside = tree["inside"], tree["outside"]
    logs = tmp_path / "logs"
    logs.mkdir()
    roots = Roots(inside)
    before = tree_digest(tree["root"] / "outside")
    async with stdio(logs, roots, mode) as client:
        here: dict[str, Any] = {"workspace": str(inside / "ws")}
        assert (await call_ok(client, "list_experiments", here))["experiments"] == []
        install = {"python": str(outside / "new-env"), "create_env": True, "branch": "main"}
        result = await client.call_tool("install_engine", {**install, "profile": NOWHERE})
        refused(result, "install_engine", f"python {outside / 'new-env'}", inside.as_uri())
        escaping = {"workspace": str(inside / "escape" / "ws")}
        result = await client.call_tool("list_experiments", escaping)
        refused(result, "list_experiments", f"(resolves to {outside / 'ws'})")

        roots.paths = [outside]
        await client.send_roots_list_changed()
        assert (await call_ok(client, "list_experiments", escaping))["experiments"] == []
        refused(await client.call_tool("list_experiments", here), "list_experiments")
    assert roots.asked == 5  # roots/list before each of the five calls
    assert tree_digest(tree["root"] / "outside") == before
    assert not (outside / "new-env").exists()
    assert "Traceback" not in (logs / "server-stderr.log").read_text()
