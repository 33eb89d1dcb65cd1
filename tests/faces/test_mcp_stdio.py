"""The MCP server as a real subprocess over stdio, through the SDK client. A `| tee` wrapper
records every line the server writes to stdout; each must be a JSON-RPC message."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import mcp as mcp_support
from support.mcp import BIN, Wire, serve
from support.refengine import holdable, holding

from mcp_server.environment.install import STEPS
from mcp_server.faces.registry import ROWS
from mcp_server.source.sourcerepo import SourceRepository

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
async def test_install_launch_interrupt_resume_over_stdio(
    source_repo: SourceRepository, tmp_path: Path
) -> None:
    wire = Wire(tmp_path)
    env, workspace = tmp_path / "env", tmp_path / "ws"
    manifest = mcp_support.write_manifest(tmp_path, "stdio-exp", max_trials=6, sleep=0.4)
    hold = tmp_path / "hold"
    data = yaml.safe_load(manifest.read_text())
    data["workload"]["argv"] = holdable(data["workload"]["argv"], hold)
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    ids = {"experiment_id": "stdio-exp", "workspace": str(workspace)}
    python, engine = str(env), mcp_support.engine_args(source_repo)
    progress = mcp_support.ProgressLog()
    ask = mcp_support.Answer("accept", {"branch": "main"})
    async with serve([str(BIN / "automl-setup-mcp")], wire, "legacy", ask) as client:
        # The branch question travels as an elicitation/create request over the pipe.
        install = {"python": python, "create_env": True, "profile": engine}
        installed = await mcp_support.call_ok(
            client, "install_engine", install, progress_callback=progress
        )
        assert installed["record"]["source"]["commit"] == source_repo.head("main")
        assert [q.message for q in ask.seen] == [
            "Install the engine from main, or from which development branch?"
        ]
        assert progress.strictly_increasing() and len(progress.events) >= len(STEPS)

        checked = await mcp_support.call_ok(
            client, "verify_engine", {"python": python, "profile": engine}
        )
        assert checked["verified"] is True

        launch = {"manifest": str(manifest), "workspace": str(workspace), "python": python}

        async def status() -> dict[str, Any]:
            return await mcp_support.call_ok(client, "status_experiment", ids)

        # The second trial cannot finish before the SIGTERM: it lands on a running engine.
        with holding(hold, 1):
            started = await mcp_support.call_ok(client, "launch_experiment", launch)
            await mcp_support.wait_for_state(
                status, lambda s: s["state"] == "running" and (s["trials_done"] or 0) >= 1
            )
            os.kill(started["pid"], signal.SIGTERM)  # an interruption of the detached engine
            stopped = await mcp_support.wait_for_state(
                status, lambda s: s["state"] == "interrupted" and not s["controller_running"]
            )
        assert stopped["trials_done"] < 6

        resumed = await mcp_support.call_ok(
            client, "resume_experiment", {**ids, "manifest": str(manifest), "python": python}
        )
        assert resumed["action"] == "resume" and resumed["pid"] != started["pid"]
        assert resumed["engine_commit"] == installed["record"]["source"]["commit"]
        done = await mcp_support.wait_for_state(status, mcp_support.finished)
        assert done["trials_done"] == 6
        assert done["last_attempt"]["action"] == "resume"

        bound = await mcp_support.call_ok(client, "verify_engine", {"python": python, **ids})
        assert bound["experiment"]["matches"] is True
        hostile = await client.call_tool(
            "install_engine", {"python": python, "branch": "--upload-pack=touch"}
        )
        assert mcp_support.error_text(hostile, "install_engine").startswith("validate branch:")

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
    ask = mcp_support.Answer("accept", {"branch": "dev/next"})
    progress = mcp_support.ProgressLog()
    async with serve([str(BIN / "automl-setup"), "mcp"], wire, "auto", ask) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == len(ROWS)  # one tool per operation
        args = {
            "python": str(env),
            "create_env": True,
            "profile": mcp_support.engine_args(source_repo),
        }
        out = await mcp_support.call_ok(client, "install_engine", args, progress_callback=progress)
        bad = await client.call_tool(
            "resolve_branch", {"branch": "a..b", "profile": mcp_support.engine_args(source_repo)}
        )
        payload = tmp_path / "payload"
        ext = {"repository": f"ext::sh%20-c%20touch%20{payload}"}
        hostile = await client.call_tool("resolve_branch", {"branch": "main", "profile": ext})
    assert out["record"]["source"]["requested_ref"] == "refs/heads/dev/next"
    assert len(ask.seen) == 1 and progress.strictly_increasing()
    assert mcp_support.error_text(bad, "resolve_branch").startswith(
        "validate branch: 'a..b' is not a valid"
    )
    refusal = mcp_support.error_text(hostile, "resolve_branch")
    assert refusal.startswith("validate repository: transport 'ext' is not allowed")
    assert not payload.exists()
    messages = wire.messages()
    # 2026-07-28: the question comes back inside the tools/call result (input_required).
    assert any("inputRequests" in m.get("result", {}) for m in messages)
    assert any(m.get("method") == "notifications/progress" for m in messages)


async def test_the_lists_before_the_first_call_are_the_lists_after_it(tmp_path: Path) -> None:
    """Before any call the server answers the lists from its committed catalog; the first call
    registers the tools themselves. A client must not see a difference."""
    wire = Wire(tmp_path)
    async with serve([str(BIN / "automl-setup-mcp")], wire, "legacy") as client:
        tools = (await client.list_tools()).tools
        templates = (await client.list_resource_templates()).resource_templates
        bad = await client.call_tool("resolve_branch", {"branch": "a..b"})
        tools_after = (await client.list_tools()).tools
        templates_after = (await client.list_resource_templates()).resource_templates
    assert mcp_support.error_text(bad, "resolve_branch").startswith("validate branch: 'a..b'")
    assert len(tools) == len(ROWS) and len(templates) == 6
    assert tools == tools_after and templates == templates_after


async def test_committed_mcp_json_starts_the_server(tmp_path: Path) -> None:
    """The project-scoped `.mcp.json` at the repository root names a working server."""
    config = json.loads((REPO / ".mcp.json").read_text())
    entry = config["mcpServers"]["automl-setup"]
    assert entry["type"] == "stdio" and entry["args"] == []
    if not (REPO / entry["command"]).exists():
        pytest.skip(f"{entry['command']} is not installed in this checkout")
    wire = Wire(tmp_path)
    async with serve([str(REPO / entry["command"])], wire, "legacy") as client:
        tools = (await client.list_tools()).tools
    assert len(tools) == len(ROWS)  # one tool per operation
    assert all("result" in m for m in wire.messages())  # initialize and tools/list answers
