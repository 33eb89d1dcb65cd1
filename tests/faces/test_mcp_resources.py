"""The MCP resources through the real SDK client (in process, and once over stdio): every
template listed, every resource read and compared with the file or the `automl-setup --json` it
mirrors, and unknown or malformed URIs refused with the core's message, changing nothing."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.shared.uri_template import UriTemplate
from mcp.types import TextResourceContents
from support.cli import run_cli
from support.engines import install_main, make_venv, new_source_repo
from support.mcp import Wire, call_ok, finished, serve, wait_for_state, write_manifest
from support.trees import tree_digest

from mcp_server.experiments.logs import LOG_TAIL_BYTES
from mcp_server.faces.mcp.resources import environment_uri, experiment_uri
from mcp_server.faces.mcp.server import server

pytestmark = pytest.mark.anyio
EXP = "res-1"
JSON = "application/json"
TEMPLATES = {
    "automl-setup://environment/{python}/record": JSON,
    "automl-setup://environment/{python}/history": JSON,
    "automl-setup://experiment/{workspace}/{experiment_id}/binding": JSON,
    "automl-setup://experiment/{workspace}/{experiment_id}/attempts": JSON,
    "automl-setup://experiment/{workspace}/{experiment_id}/status": JSON,
    "automl-setup://experiment/{workspace}/{experiment_id}/log/{attempt}": "text/plain",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Launched:
    """An environment with `main` installed and one finished experiment launched through the
    launch_experiment tool, shared by the tests that only read them."""

    root: Path
    env: Path
    workspace: Path
    started: dict[str, Any]

    @property
    def sidecar(self) -> Path:
        return self.workspace / ".automl-setup" / EXP

    def cli_json(self, *args: str) -> Any:
        result = run_cli(*args, "--json")
        assert result.code == 0, result.output
        return json.loads(result.stdout)


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Launched:
    root = tmp_path_factory.mktemp("mcp-resources")
    env = install_main(root / "env", new_source_repo(root / "repo"))
    workspace = root / "ws"
    manifest = write_manifest(root, EXP, max_trials=2)

    async def launch() -> dict[str, Any]:
        args = {"manifest": str(manifest), "workspace": str(workspace), "python": str(env)}
        ids = {"experiment_id": EXP, "workspace": str(workspace)}
        async with Client(server) as client:
            started = await call_ok(client, "launch_experiment", args)
            await wait_for_state(lambda: call_ok(client, "status_experiment", ids), finished)
        return started

    return Launched(root, env, workspace, anyio.run(launch))


async def _read(client: Client, uri: str) -> TextResourceContents:
    result = await client.read_resource(uri)
    [content] = result.contents
    assert isinstance(content, TextResourceContents) and content.uri == uri
    return content


async def _read_json(client: Client, uri: str) -> Any:
    content = await _read(client, uri)
    assert content.mime_type == JSON
    return json.loads(content.text)


# --------------------------------------------------------------------------------------------
# Listing and reading


async def test_templates_are_listed_with_their_mime_types() -> None:
    async with Client(server) as client:
        templates = (await client.list_resource_templates()).resource_templates
        static = (await client.list_resources()).resources
    assert {t.uri_template: t.mime_type for t in templates} == TEMPLATES
    assert all(t.description for t in templates)
    assert static == []  # every resource names its environment or experiment


def test_uris_round_trip_absolute_paths() -> None:
    odd = "/tmp/a b/%2F/ü/x?y#z"
    uri = environment_uri(odd, "record")
    assert uri == "automl-setup://environment/%2Ftmp%2Fa%20b%2F%252F%2F%C3%BC%2Fx%3Fy%23z/record"
    assert UriTemplate.parse(next(iter(TEMPLATES))).match(uri) == {"python": odd}


@pytest.mark.slow
async def test_environment_record_and_history_match_the_files_and_cli(launched: Launched) -> None:
    python = str(launched.env)
    async with Client(server) as client:
        record = await _read_json(client, environment_uri(python, "record"))
        history = await _read_json(client, environment_uri(python, "history"))
    state = launched.env / ".automl-setup"
    assert record == json.loads((state / "engine-record.json").read_bytes())
    assert history == launched.cli_json("history", "--python", python)
    assert [e["event"] for e in history["entries"]] == ["installed"]


@pytest.mark.slow
async def test_experiment_resources_match_the_files_and_cli(launched: Launched) -> None:
    ws = str(launched.workspace)
    started = launched.started
    uris = {leaf: experiment_uri(ws, EXP, leaf) for leaf in ("binding", "attempts", "status")}
    # The launch reply names its resources beside its paths.
    assert started["binding_resource"] == uris["binding"]
    assert started["attempts_resource"] == uris["attempts"]
    assert started["status_resource"] == uris["status"]
    assert started["log_resource"] == experiment_uri(ws, EXP, "log/1")
    async with Client(server) as client:
        binding = await _read_json(client, uris["binding"])
        attempts = await _read_json(client, uris["attempts"])
        status = await _read_json(client, uris["status"])
        log = await _read(client, started["log_resource"])
    assert binding == json.loads(Path(started["binding_path"]).read_bytes())
    lines = Path(started["attempts_path"]).read_bytes().splitlines()
    assert attempts == {
        "experiment_id": EXP,
        "attempts_path": started["attempts_path"],
        "entries": [json.loads(line) for line in lines],
        "torn_line": None,
    }
    assert status == launched.cli_json("status", "--experiment-id", EXP, "--workspace", ws)
    assert status["state"] == "completed"
    assert log.mime_type == "text/plain"
    assert log.text == Path(started["log_path"]).read_text() and log.text


@pytest.mark.slow
async def test_log_tail_is_bounded_whole_lines_and_masks_credentials(launched: Launched) -> None:
    big = launched.sidecar / "attempt-90.log"
    lines = [f"line {n:06d} " + "x" * 80 for n in range(2000)]
    lines.append("cloning https://alice:s3cret-token@git.example/engine.git")
    big.write_text("\n".join(lines) + "\n")
    try:
        async with Client(server) as client:
            uri = experiment_uri(str(launched.workspace), EXP, "log/90")
            tail = (await _read(client, uri)).text
    finally:
        big.unlink()
    assert len(tail.encode()) <= LOG_TAIL_BYTES
    assert tail.startswith("line ") and tail.splitlines()[0] in lines  # from a whole line
    assert tail.splitlines()[-2] == lines[-2]
    assert "s3cret-token" not in tail and "alice" not in tail
    assert tail.endswith("git.example/engine.git\n")


# --------------------------------------------------------------------------------------------
# Refusals: the core's message, and nothing changed


async def _refused(client: Client, uri: str) -> str:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    return caught.value.error.message


@pytest.mark.slow
async def test_unknown_and_malformed_uris_are_refused_changing_nothing(
    launched: Launched, tmp_path: Path
) -> None:
    ws = str(launched.workspace)
    bare = make_venv(tmp_path / "bare")
    cases = {
        "automl-setup://nothing": "Unknown resource: automl-setup://nothing",
        "other://environment/%2Fx/record": "Unknown resource:",
        environment_uri(str(launched.env), "journal"): "Unknown resource:",
        experiment_uri(ws, EXP, "log/1/more"): "Unknown resource:",
        experiment_uri(ws, "../res-1", "binding"): "validate experiment id: '../res-1' is not",
        experiment_uri(ws, "-rf", "status"): "validate experiment id: '-rf' is not",
        experiment_uri(ws, "nope", "attempts"): "read resource: no experiment 'nope' launched",
        experiment_uri(ws + "\x00", EXP, "binding"): "validate workspace: the workspace path is",
        experiment_uri(ws, EXP, "log/0"): "read log: '0' is not an attempt number",
        experiment_uri(ws, EXP, "log/x1"): "read log: 'x1' is not an attempt number",
        experiment_uri(ws, EXP, "log/7"): f"read log: experiment {EXP} has no log of attempt 7",
        environment_uri(str(tmp_path / "missing"), "history"): "locate environment: ",
        environment_uri(str(bare), "record"): f"read record: no install record in {bare}",
    }
    before = tree_digest(launched.root), tree_digest(bare)
    async with Client(server) as client:
        for uri, expected in cases.items():
            message = await _refused(client, uri)
            assert message.startswith(expected), (uri, message)
            assert "remedy: " in message or message.startswith("Unknown resource"), message
    assert (tree_digest(launched.root), tree_digest(bare)) == before
    assert not (tmp_path / "missing").exists()


# --------------------------------------------------------------------------------------------
# Over stdio


@pytest.mark.slow
async def test_resources_over_stdio(launched: Launched, tmp_path: Path) -> None:
    python = str(launched.env)
    status_uri = experiment_uri(str(launched.workspace), EXP, "status")
    command = [str(Path(sys.executable).parent / "automl-setup-mcp")]
    before = tree_digest(launched.root)
    async with serve(command, Wire(tmp_path), "auto") as client:
        templates = (await client.list_resource_templates()).resource_templates
        history = await _read_json(client, environment_uri(python, "history"))
        status = await _read_json(client, status_uri)
        unknown = await _refused(client, "automl-setup://environment/%2Fx/wheel")
        bad = await _refused(client, experiment_uri(str(launched.workspace), "..", "status"))
    assert {t.uri_template for t in templates} == set(TEMPLATES)
    assert history == launched.cli_json("history", "--python", python)
    ws = str(launched.workspace)
    assert status == launched.cli_json("status", "--experiment-id", EXP, "--workspace", ws)
    assert unknown == "Unknown resource: automl-setup://environment/%2Fx/wheel"
    assert bad.startswith("validate experiment id: '..' is not a valid experiment id")
    assert tree_digest(launched.root) == before
