"""Helpers shared by the MCP tests (no tests in this module)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import yaml
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.types import jsonrpc_message_adapter

from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin: the console scripts live beside python
EXAMPLE_MANIFEST = REPO / "mcp_server" / "reference_engine" / "examples" / "quadratic.yaml"
MODES = ["auto", "legacy"]  # auto negotiates 2026-07-28; legacy is today's initialize handshake
PREFIX = "Error executing tool "


def engine_args(repo: SourceRepository) -> dict[str, str]:
    """The `engine` argument that points the tools at a local reference-engine repository."""
    return {
        "repository": repo.url,
        "subdirectory": repo.subdirectory,
        "distribution": REFERENCE_DISTRIBUTION,
    }


def write_manifest(
    directory: Path, experiment_id: str, *, max_trials: int = 3, sleep: float = 0.0
) -> Path:
    """The example manifest with another id, fewer trials and a shorter sleep per trial."""
    data = yaml.safe_load(EXAMPLE_MANIFEST.read_text())
    data["search"]["experiment_id"] = experiment_id
    data["search"]["budget"]["max_trials"] = max_trials
    argv = data["workload"]["argv"]
    argv[argv.index("--sleep") + 1] = str(sleep)
    path = directory / f"{experiment_id}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class Answer:
    """An elicitation callback that answers every question the same way and keeps them."""

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action, self.content = action, content
        self.seen: list[types.ElicitRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.seen.append(params)
        return types.ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


class ProgressLog:
    """A progress callback that keeps every notification."""

    def __init__(self) -> None:
        self.events: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.events.append((progress, total, message))

    @property
    def values(self) -> list[float]:
        return [p for p, _t, _m in self.events]

    @property
    def messages(self) -> list[str]:
        return [m or "" for _p, _t, m in self.events]

    def strictly_increasing(self) -> bool:
        return all(a < b for a, b in zip(self.values, self.values[1:], strict=False))


def error_text(result: types.CallToolResult, tool: str) -> str:
    """The message of a tool error, without the SDK's `Error executing tool NAME: ` prefix."""
    assert result.is_error, result.structured_content
    assert result.structured_content is None
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(f"{PREFIX}{tool}: "), text
    return text.removeprefix(f"{PREFIX}{tool}: ")


async def call_ok(client: Client, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args, **kw)
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    return result.structured_content


def finished(status: dict[str, Any]) -> bool:
    """Completed, and the engine process has let go of the experiment."""
    return status["state"] == "completed" and not status["controller_running"]


async def wait_for_state(
    status: Callable[[], Awaitable[dict[str, Any]]],
    done: Callable[[dict[str, Any]], bool],
    timeout: float = 60,
) -> dict[str, Any]:
    """Poll experiment_status until `done(status)` holds."""
    deadline = time.monotonic() + timeout
    while True:
        current = await status()
        if done(current):
            return current
        assert time.monotonic() < deadline, current
        await anyio.sleep(0.1)


class Roots:
    """A list_roots callback whose roots a test changes; counts the requests it answers."""

    def __init__(self, *paths: Path) -> None:
        self.paths = list(paths)
        self.asked = 0

    async def __call__(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.asked += 1
        return types.ListRootsResult(
            roots=[types.Root(uri=path.as_uri(), name=path.name) for path in self.paths]  # type: ignore[arg-type]
        )


class Wire:
    """What the server wrote: every stdout line, and its stderr."""

    def __init__(self, root: Path) -> None:
        self.stdout = root / "server-stdout.jsonl"
        self.stderr = root / "server-stderr.log"

    def messages(self) -> list[dict[str, Any]]:
        lines = self.stdout.read_text().splitlines()
        for line in lines:
            jsonrpc_message_adapter.validate_json(line)  # raises on anything but JSON-RPC
        return [json.loads(line) for line in lines]


@asynccontextmanager
async def serve(
    command: list[str], wire: Wire, mode: str, ask: Answer | None = None
) -> AsyncIterator[Client]:
    script = " ".join(f'"{part}"' for part in command) + f' | tee "{wire.stdout}"'
    # The SDK passes only a minimal environment by default; the builds need this one (index,
    # certificates), as a real client passes its own. No inherited VIRTUAL_ENV picks a target.
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    params = StdioServerParameters(
        command="sh", args=["-c", script], cwd=str(wire.stdout.parent), env=env
    )
    with wire.stderr.open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode=mode, elicitation_callback=ask
        ) as client:
            yield client
