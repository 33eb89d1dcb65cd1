"""The MCP server as a real subprocess over stdio, through the SDK client. A `| tee` wrapper
records every line the server writes to stdout; each must be a JSON-RPC message."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import jsonrpc_message_adapter
from test_mcp_support import (
    Answer,
    ProgressLog,
    call_ok,
    engine_args,
    error_text,
    finished,
    wait_for_state,
    write_manifest,
)

from mcp_server.install import STEPS
from mcp_server.sourcerepo import SourceRepository

pytestmark = pytest.mark.anyio
BIN = Path(sys.executable).parent  # the venv's bin: the console scripts live beside python


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


@pytest.mark.slow
async def test_install_launch_interrupt_resume_over_stdio(
    source_repo: SourceRepository, tmp_path: Path
) -> None:
    wire = Wire(tmp_path)
    env, workspace = tmp_path / "env", tmp_path / "ws"
    manifest = write_manifest(tmp_path, "stdio-exp", max_trials=6, sleep=0.4)
    ids = {"experiment_id": "stdio-exp", "workspace": str(workspace)}
    python, engine = str(env), engine_args(source_repo)
    progress = ProgressLog()
    ask = Answer("accept", {"branch": "main"})
    async with serve([str(BIN / "automl-setup-mcp")], wire, "legacy", ask) as client:
        # The branch question travels as an elicitation/create request over the pipe.
        install = {"python": python, "create_env": True, "engine": engine}
        installed = await call_ok(client, "install_engine", install, progress_callback=progress)
        assert installed["record"]["source"]["commit"] == source_repo.head("main")
        assert [q.message for q in ask.seen] == [
            "Install the engine from main, or from which development branch?"
        ]
        assert progress.strictly_increasing() and len(progress.events) >= len(STEPS)

        checked = await call_ok(client, "check_provenance", {"python": python, "engine": engine})
        assert checked["verified"] is True

        launch = {"manifest": str(manifest), "workspace": str(workspace), "python": python}
        started = await call_ok(client, "launch_experiment", launch)

        async def status() -> dict[str, Any]:
            return await call_ok(client, "experiment_status", ids)

        await wait_for_state(
            status, lambda s: s["state"] == "running" and (s["trials_done"] or 0) >= 1
        )
        os.kill(started["pid"], signal.SIGTERM)  # an interruption of the detached engine
        stopped = await wait_for_state(
            status, lambda s: s["state"] == "interrupted" and not s["controller_running"]
        )
        assert stopped["trials_done"] < 6

        resumed = await call_ok(
            client, "resume_experiment", {**ids, "manifest": str(manifest), "python": python}
        )
        assert resumed["action"] == "resume" and resumed["pid"] != started["pid"]
        assert resumed["engine_commit"] == installed["record"]["source"]["commit"]
        done = await wait_for_state(status, finished)
        assert done["trials_done"] == 6
        assert done["last_attempt"]["action"] == "resume"

        bound = await call_ok(client, "check_provenance", {"python": python, **ids})
        assert bound["experiment"]["matches"] is True
        hostile = await client.call_tool(
            "install_engine", {"python": python, "branch": "--upload-pack=touch"}
        )
        assert error_text(hostile, "install_engine").startswith("validate branch:")

    messages = wire.messages()
    methods = [m.get("method") for m in messages]
    assert "elicitation/create" in methods and "notifications/progress" in methods
    assert sum("result" in m for m in messages) >= 10
    errors = wire.stderr.read_text()
    assert "Traceback" not in errors


@pytest.mark.slow
async def test_automl_setup_mcp_subcommand_serves_the_modern_protocol(
    source_repo: SourceRepository, tmp_path: Path
) -> None:
    wire = Wire(tmp_path)
    env = tmp_path / "env"
    ask = Answer("accept", {"branch": "dev/next"})
    progress = ProgressLog()
    async with serve([str(BIN / "automl-setup"), "mcp"], wire, "auto", ask) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == 9
        args = {"python": str(env), "create_env": True, "engine": engine_args(source_repo)}
        out = await call_ok(client, "install_engine", args, progress_callback=progress)
        bad = await client.call_tool(
            "resolve_branch", {"branch": "a..b", "engine": engine_args(source_repo)}
        )
    assert out["record"]["source"]["requested_ref"] == "refs/heads/dev/next"
    assert len(ask.seen) == 1 and progress.strictly_increasing()
    assert error_text(bad, "resolve_branch").startswith("validate branch: 'a..b' is not a valid")
    messages = wire.messages()
    # 2026-07-28: the question comes back inside the tools/call result (input_required).
    assert any("inputRequests" in m.get("result", {}) for m in messages)
    assert any(m.get("method") == "notifications/progress" for m in messages)
