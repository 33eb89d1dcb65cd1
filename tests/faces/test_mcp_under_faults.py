"""The MCP face under faults, over real stdio through the SDK client: unknown arguments are
refused, a client that goes away mid-install leaves a finished (or rolled-back) environment and
no server behind, a call during shutdown is refused, and progress ends at its total and stops
once the call is cancelled or done."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import mcp as mcp_support
from support.cli import run_cli
from support.mcp import BIN, Wire, serve

from mcp_server.environment.install import STEPS
from mcp_server.faces.registry import ROWS
from mcp_server.source.sourcerepo import SourceRepository

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
SERVER = [str(BIN / "automl-setup-mcp")]
# Longer than the SDK client's grace before it SIGKILLs the server's process group (2 s after
# closing stdin it sends SIGTERM, 2 s later SIGKILL): the install must outlive that.
PAUSE_S = 6.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _tagged(tag: str, command: str | None = None) -> list[int]:
    """Pids of live processes started with this tag (the server, its children, the wrapper),
    or only those whose argv holds exactly `command`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if command is not None and command.encode() not in argv:
            continue
        if f"AUTOML_SETUP_TEST_TAG={tag}".encode() in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_gone(tag: str, command: str | None = None, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while alive := _tagged(tag, command):
        assert time.monotonic() < deadline, f"server processes still alive: {alive}"
        time.sleep(0.2)


@pytest.fixture
def paused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[str, Path]:
    """The served install pauses PAUSE_S seconds after uv installed it (journal written, record
    not yet), and says so in a marker file; every server process carries a tag."""
    tag, marker = uuid.uuid4().hex, tmp_path / "paused-at"
    monkeypatch.setenv("AUTOML_SETUP_TEST_TAG", tag)
    monkeypatch.setenv("AUTOML_SETUP_PAUSE_AT", "uv-installed")
    monkeypatch.setenv("AUTOML_SETUP_PAUSE_SECONDS", str(PAUSE_S))
    monkeypatch.setenv("AUTOML_SETUP_PAUSE_FILE", str(marker))
    return tag, marker


async def _until(marker: Path, timeout: float = 120) -> None:
    with anyio.fail_after(timeout):
        while not marker.exists():
            await anyio.sleep(0.05)


def _install_args(env: Path, repo: SourceRepository, **extra: Any) -> dict[str, Any]:
    return {
        "python": str(env),
        "branch": "main",
        "create_env": True,
        "profile": mcp_support.engine_args(repo),
        **extra,
    }


def _assert_verified(env: Path) -> None:
    verified = run_cli("verify", "--python", str(env))
    assert verified.code == 0, verified.output
    assert verified.stdout.startswith("verified:"), verified.output
    assert not (env / ".automl-setup" / "journal.json").exists()


async def test_unknown_arguments_are_refused_by_every_tool(
    source_repo: SourceRepository, tmp_path: Path
) -> None:
    wire, env = Wire(tmp_path), tmp_path / "env"
    async with serve(SERVER, wire, "legacy") as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == len(ROWS)  # one tool per operation
        for tool in tools:
            assert tool.input_schema.get("additionalProperties") is False, tool.name
        typo = await client.call_tool(
            "install_engine", {**_install_args(env, source_repo, dry_run=True)}
        )
        dashed = {k: v for k, v in _install_args(env, source_repo).items() if k != "create_env"}
        hyphen = await client.call_tool("install_engine", {**dashed, "create-env": True})
        status = await client.call_tool(
            "status_experiment",
            {"experiment_id": "x", "workspace": str(tmp_path), "verbose": True},
        )
    assert "dry_run" in mcp_support.error_text(typo, "install_engine")
    assert "create-env" in mcp_support.error_text(hyphen, "install_engine")
    assert "verbose" in mcp_support.error_text(status, "status_experiment")
    assert not env.exists()  # nothing was installed, not even the environment
    wire.messages()


async def test_client_going_away_mid_install_leaves_a_finished_environment(
    source_repo: SourceRepository, tmp_path: Path, paused: tuple[str, Path]
) -> None:
    tag, marker = paused
    wire, env = Wire(tmp_path), tmp_path / "env"
    progress = mcp_support.ProgressLog()
    async with serve(SERVER, wire, "legacy") as client, anyio.create_task_group() as group:

        async def install() -> None:
            await client.call_tool(
                "install_engine", _install_args(env, source_repo), progress_callback=progress
            )

        group.start_soon(install)
        await _until(marker)
        group.cancel_scope.cancel()  # the client cancels the call, then closes the session
    # The SDK client has SIGTERMed and SIGKILLed the server's process group by now; the
    # transaction must still reach its end, and the server exit on its own, soon after.
    _wait_gone(tag, timeout=60)
    _assert_verified(env)
    messages = wire.messages()
    steps = [
        m["params"]["message"] for m in messages if m.get("method") == "notifications/progress"
    ]
    # Nothing reported after the cancellation: not the verify and record steps that ran on.
    assert not any("verify]" in s or "record]" in s for s in steps), steps
    assert "Traceback" not in wire.stderr.read_text()


async def test_shutdown_refuses_new_calls_and_lets_the_install_finish(
    source_repo: SourceRepository, tmp_path: Path, paused: tuple[str, Path]
) -> None:
    tag, marker = paused
    wire, env = Wire(tmp_path), tmp_path / "env"
    progress = mcp_support.ProgressLog()
    results: dict[str, Any] = {}
    async with serve(SERVER, wire, "legacy") as client:
        async with anyio.create_task_group() as group:

            async def install() -> None:
                results["install"] = await client.call_tool(
                    "install_engine", _install_args(env, source_repo), progress_callback=progress
                )

            group.start_soon(install)
            await _until(marker)
            for pid in _tagged(tag, SERVER[0]):
                os.kill(pid, signal.SIGTERM)
            # The server handles SIGTERM on its own schedule: call until it refuses, well
            # inside the install's pause (after it, the install ends and the server exits).
            deadline = time.monotonic() + PAUSE_S / 2
            listing = {"workspace": str(tmp_path)}
            while not (late := await client.call_tool("list_experiments", listing)).is_error:
                assert time.monotonic() < deadline, "calls still accepted after SIGTERM"
                await anyio.sleep(0.05)
        installed = results["install"]
        assert not installed.is_error, installed.content
        _wait_gone(tag, SERVER[0], timeout=60)  # exits by itself once the install is done
    refusal = mcp_support.error_text(late, "list_experiments")
    assert "shutting down" in refusal and "remedy:" in refusal
    assert installed.structured_content is not None
    assert installed.structured_content["record"]["source"]["commit"] == source_repo.head("main")
    _assert_verified(env)
    # Progress ends exactly at its total, strictly increasing on the way.
    total = len(STEPS) * 1000
    assert progress.strictly_increasing() and progress.events[-1][:2] == (total, total)
    wire.messages()
