"""Run from a terminal (a pseudo-terminal of the test), nothing automl-setup starts ever asks
it anything: not git, not ssh, not the git and ssh uv starts for a private dependency, on the
command line or through the MCP server. An unknown host key is refused, never accepted, and
the terminal gets the refusal instead of a question."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from support.engines import engine_marker
from support.remotes import (
    DEPENDENCY,
    PRIVATE_BRANCH,
    PrivateEngine,
    install_private,
    run_in_terminal,
)

# The questions git and ssh put to a terminal (a refusal may quote "could not read Username
# for ...": that is no question).
QUESTION = re.compile(
    r"(?m)^\s*(?:Username for|Password for)|continue connecting|Enter passphrase|\(yes/no"
)
CLI = [sys.executable, "-m", "mcp_server.faces.cli"]


def _asked(screen: str) -> list[str]:
    return QUESTION.findall(screen)


def test_an_unknown_host_key_is_refused_on_a_terminal(ssh_engine: PrivateEngine) -> None:
    client = ssh_engine.client
    client.known_hosts.write_text("")
    argv = [*CLI, "resolve", "--branch", "main", *ssh_engine.profile()]
    status, screen = run_in_terminal(argv, ssh_engine.env(), timeout=60)
    assert status == 1, screen  # None: still waiting, on a question
    assert _asked(screen) == [], screen
    assert "is not in your known_hosts, and an unknown key is never accepted" in screen
    assert client.known_hosts.read_text() == ""


def test_missing_https_credentials_are_not_asked_for_on_a_terminal(
    https_engine: PrivateEngine,
) -> None:
    (https_engine.client.home / ".git-credentials").write_text("")
    argv = [*CLI, "resolve", "--branch", "main", *https_engine.profile()]
    status, screen = run_in_terminal(argv, https_engine.env(), timeout=60)
    assert status == 1, screen
    assert _asked(screen) == [], screen
    assert "asked for credentials and none were available" in screen


@pytest.mark.slow
def test_uvs_ssh_never_asks_about_a_dependencys_host_key(
    ssh_engine: PrivateEngine, tmp_path: Path
) -> None:
    """The engine's own host is known, its private dependency's (another name of the host) is
    not: uv's git and ssh run without a terminal, refuse the key, and the install says so."""
    target = tmp_path / "env"
    first = install_private(ssh_engine, target, branch="main")
    assert first.code == 0, first.output
    moved = ssh_engine.dependency_url.replace("127.0.0.1", "localhost")
    ssh_engine.engine.commit_engine(
        "dev/untrusted-dep", base="main", marker="untrusted",
        dependencies=[f"{DEPENDENCY} @ git+{moved}@{ssh_engine.dependency_commit}"],
    )  # fmt: skip
    known_hosts = ssh_engine.client.known_hosts.read_bytes()
    argv = [
        *CLI, "install", "--branch", "dev/untrusted-dep", "--python", str(target),
        *ssh_engine.profile(),
    ]  # fmt: skip
    status, screen = run_in_terminal(argv, ssh_engine.env(), timeout=120)
    assert status == 1, screen
    assert _asked(screen) == [], screen
    assert f"uv could not fetch the engine's dependency {DEPENDENCY}" in screen
    assert "is not in your known_hosts" in screen
    assert ssh_engine.client.known_hosts.read_bytes() == known_hosts
    assert engine_marker(target) == "private-main"


MCP_CALL = """
import json, sys
import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    server = StdioServerParameters(command=sys.argv[1], env=json.loads(sys.argv[2]))
    async with Client(stdio_client(server)) as client:
        result = await client.call_tool(sys.argv[3], json.loads(sys.argv[4]))
    print("TOOL-ERROR" if result.is_error else "TOOL-OK")
    print(result.content[0].text)

anyio.run(main)
"""


def test_the_mcp_server_started_from_a_terminal_never_asks(
    ssh_engine: PrivateEngine, tmp_path: Path
) -> None:
    """An MCP client run in a terminal starts the server, which inherits that terminal: an
    install whose host key is unknown is refused through the tool, nothing is asked."""
    ssh_engine.client.known_hosts.write_text("")
    script = tmp_path / "call.py"
    script.write_text(MCP_CALL)
    arguments = {
        "branch": PRIVATE_BRANCH,
        "python": str(tmp_path / "env"),
        "create_env": True,
        "profile": {
            "repository": ssh_engine.url,
            "subdirectory": ssh_engine.engine.subdirectory,
            "distribution": "automl-refengine",
        },
    }
    env = ssh_engine.env()
    server = str(Path(sys.executable).with_name("automl-setup-mcp"))
    argv = [sys.executable, str(script), server, json.dumps(env), "install_engine",
            json.dumps(arguments)]  # fmt: skip
    status, screen = run_in_terminal(argv, env, timeout=90)
    assert status == 0, screen
    assert _asked(screen) == [], screen
    assert "TOOL-ERROR" in screen
    assert "is not in your known_hosts, and an unknown key is never accepted" in screen
    assert not (tmp_path / "env").exists()
