"""The bundle as the real coding-agent clients see it, offline, each with a private HOME:
Claude Code (`@anthropic-ai/claude-code`) and Codex (`@openai/codex`), from npm.

Two roads into a user's project: automl-setup installed from its wheel into a fresh venv
outside the checkout and `automl-setup init` run there; and this repository as a Claude Code
and a Codex plugin (and marketplace). Like the browser check, the tests skip, saying why, when
the clients are absent, and fail in CI (`AUTOML_REQUIRE_AGENT_CLIENTS=1`, set by .ci/run,
which installs them into `$AUTOML_AGENT_CLIENTS`)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.agent_clients import SKILLS, Clients, bundled_descriptions, codex_skills
from support.cli import outside_env
from support.engines import WheelInstall, checkout_copy
from support.projects import user_project
from support.release import project_version
from support.trees import snapshot

from mcp_server.faces.registry import ROWS

pytestmark = pytest.mark.slow


def test_init_from_the_wheel_is_seen_by_both_clients(
    tmp_path: Path, wheel_install: WheelInstall, clients: Clients
) -> None:
    project = user_project(tmp_path / "proj")
    init = [wheel_install.script("automl-setup"), "init"]
    done = subprocess.run(init, cwd=project, env=outside_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    server = wheel_install.script("automl-setup-mcp")
    assert (
        json.loads((project / ".mcp.json").read_text())["mcpServers"]["automl-setup"]["command"]
        == server
    )

    clients.approve_claude_project(project, ["automl-setup", "other"])
    listed = clients.run("claude", "mcp", "list", cwd=project)
    assert re.search(rf"^automl-setup: {re.escape(server)} +- ✔ Connected$", listed, re.M), listed
    assert re.search(r"^other: other-server ", listed, re.M), listed  # theirs, still there

    clients.trust_codex_project(project)
    codex = clients.run("codex", "mcp", "list", cwd=project)
    assert re.search(rf"^automl-setup +{re.escape(server)} .* enabled", codex, re.M), codex
    assert re.search(r"^other +other-server ", codex, re.M), codex
    skills = codex_skills(clients.run("codex", "debug", "prompt-input", cwd=project))
    for name, description in bundled_descriptions().items():
        assert skills[name] == (description, f"{project}/.agents/skills/{name}/SKILL.md")

    # A second init changes nothing; an edited copy fails --check and is never overwritten.
    before = snapshot(project)
    again = subprocess.run(init, cwd=project, env=outside_env(), capture_output=True, text=True)
    assert again.returncode == 0 and snapshot(project) == before
    check = subprocess.run([*init, "--check"], cwd=project, env=outside_env(), capture_output=True)
    assert check.returncode == 0, check.stdout
    edited = project / ".agents" / "skills" / "automl-setup" / "SKILL.md"
    edited.write_text(edited.read_text() + "\nour team's note\n")
    before = snapshot(project)
    check = subprocess.run([*init, "--check"], cwd=project, env=outside_env(), capture_output=True)
    assert (
        check.returncode == 1 and b"edited   .agents/skills/automl-setup/SKILL.md" in check.stdout
    )
    refused = subprocess.run(init, cwd=project, env=outside_env(), capture_output=True, text=True)
    assert refused.returncode == 1 and "changed since init wrote it" in refused.stderr
    assert snapshot(project) == before


def test_the_repository_is_a_claude_code_plugin_and_marketplace(
    tmp_path: Path, clients: Clients
) -> None:
    repo = checkout_copy(tmp_path / "automl-setup")
    # The root holds the marketplace; its plugin (the root again) is validated by its manifest.
    for target in (repo, repo / ".claude-plugin" / "plugin.json"):
        out = clients.run("claude", "plugin", "validate", "--json", str(target), cwd=repo)
        report = json.loads(out)
        assert report["success"] is True, out
        assert [m["errors"] for m in [report["manifest"], *report["contents"]]] == [
            [] for _ in [report["manifest"], *report["contents"]]
        ], out
    assert report["manifest"]["type"] == "plugin"
    assert sorted(report["provides"]["skills"]) == [f"automl-setup:{s}" for s in SKILLS]

    clients.run("claude", "plugin", "marketplace", "add", str(repo), cwd=tmp_path)
    clients.run("claude", "plugin", "install", "automl-setup@automl-setup", cwd=tmp_path)
    details = clients.run("claude", "plugin", "details", "automl-setup@automl-setup", cwd=tmp_path)
    assert re.search(rf"Skills \({len(SKILLS)}\) +{', '.join(SKILLS)}$", details, re.M), details
    assert re.search(r"MCP servers \(1\) +automl-setup ", details), details

    listed = clients.run("claude", "mcp", "list", cwd=tmp_path)
    plugin_server = (
        r"^plugin:automl-setup:automl-setup: uv run --project (\S+) --frozen .*✔ Connected$"
    )
    assert re.search(plugin_server, listed, re.M), listed

    # The manifest's server, started from the installed plugin's own folder, answers.
    installed = json.loads((clients.home / ".claude/plugins/installed_plugins.json").read_text())
    (entry,) = installed["plugins"]["automl-setup@automl-setup"]
    root = entry["installPath"]
    spec = json.loads((repo / ".claude-plugin" / "plugin.json").read_text())["mcpServers"]
    server = spec["automl-setup"]
    args = [a.replace("${CLAUDE_PLUGIN_ROOT}", root) for a in server["args"]]

    async def list_tools() -> int:
        params = StdioServerParameters(
            command=server["command"], args=args, cwd=str(tmp_path), env=clients.env()
        )
        with (tmp_path / "plugin-server.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                return len((await client.list_tools()).tools)

    assert anyio.run(list_tools) == len(ROWS)


def test_the_repository_is_a_codex_plugin_and_marketplace(tmp_path: Path, clients: Clients) -> None:
    repo = checkout_copy(tmp_path / "automl-setup")
    clients.run("codex", "plugin", "marketplace", "add", str(repo), cwd=tmp_path)
    clients.run("codex", "plugin", "add", "automl-setup@automl-setup", cwd=tmp_path)
    plugins = clients.run("codex", "plugin", "list", cwd=tmp_path)
    listed = rf"^automl-setup@automl-setup +installed, enabled +{re.escape(project_version())} "
    assert re.search(listed, plugins, re.M), plugins
    project = tmp_path / "project"
    project.mkdir()
    servers = clients.run("codex", "mcp", "list", cwd=project)
    cache = clients.home / ".codex/plugins/cache/automl-setup/automl-setup" / project_version()
    assert re.search(rf"^automl-setup +uv +run --project \. --frozen .*{cache}", servers, re.M)
    skills = codex_skills(clients.run("codex", "debug", "prompt-input", cwd=project))
    for name, description in bundled_descriptions().items():
        assert skills[f"automl-setup:{name}"][0] == description
