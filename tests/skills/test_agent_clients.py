"""The bundle as the real coding-agent clients see it, offline, each with a private HOME:
Claude Code (`@anthropic-ai/claude-code`) and Codex (`@openai/codex`), from npm.

Two roads into a user's project: automl-setup installed from its wheel into a fresh venv
outside the checkout and `automl-setup init` run there; and this repository as a Claude Code
and a Codex plugin (and marketplace). Like the browser check, the tests skip, saying why, when
the clients are absent, and fail in CI (`AUTOML_REQUIRE_AGENT_CLIENTS=1`, set by .ci/run,
which installs them into `$AUTOML_AGENT_CLIENTS`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.cli import REPO_ROOT, outside_env
from support.engines import WheelInstall, checkout_copy
from support.projects import user_project
from support.trees import snapshot

from mcp_server.faces.registry import ROWS
from mcp_server.source.wheelbuild import uv_binary

pytestmark = pytest.mark.slow
CLIENTS_ENV, REQUIRE_ENV = "AUTOML_AGENT_CLIENTS", "AUTOML_REQUIRE_AGENT_CLIENTS"
CLIENT_TIMEOUT_S = 180
SKILLS = sorted(p.name for p in (REPO_ROOT / "skills").iterdir() if (p / "SKILL.md").is_file())
# Anything of the developer's that could point a client at a real configuration or account.
PRIVATE = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")


def _client_dir() -> Path | None:
    named = os.environ.get(CLIENTS_ENV)
    candidates = [Path(named) / "node_modules" / ".bin"] if named else []
    found = shutil.which("claude")
    candidates += [Path(found).parent] if found else []
    for folder in candidates:
        if (folder / "claude").exists() and (folder / "codex").exists():
            return folder
    return None


@dataclass(frozen=True)
class Clients:
    """The two clients, run with HOME (and XDG folders) in a temporary directory."""

    bin: Path
    home: Path

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in outside_env().items() if k not in PRIVATE}
        # The user's uv cache stays (a plugin's server syncs its venv from it); nothing else.
        cache = subprocess.run([uv_binary(), "cache", "dir"], capture_output=True, text=True)
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            UV_CACHE_DIR=cache.stdout.strip(),
            PATH=os.pathsep.join([str(self.bin), str(Path(uv_binary()).parent), env["PATH"]]),
        )
        return env

    def run(self, client: str, *args: str, cwd: Path) -> str:
        proc = subprocess.run(
            [str(self.bin / client), *args],
            capture_output=True, text=True, cwd=cwd, env=self.env(),
            stdin=subprocess.DEVNULL, timeout=CLIENT_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"{client} {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return proc.stdout

    def approve_claude_project(self, project: Path, servers: list[str]) -> None:
        """What accepting the trust dialog and the project's servers writes."""
        state = {
            "hasCompletedOnboarding": True,
            "projects": {
                str(project): {"hasTrustDialogAccepted": True, "enabledMcpjsonServers": servers}
            },
        }
        (self.home / ".claude.json").write_text(json.dumps(state))

    def trust_codex_project(self, project: Path) -> None:
        (self.home / ".codex").mkdir(exist_ok=True)
        config = self.home / ".codex" / "config.toml"
        config.write_text(f'[projects."{project}"]\ntrust_level = "trusted"\n')


@pytest.fixture
def clients(tmp_path: Path) -> Clients:
    folder = _client_dir()
    if folder is None:
        why = f"the agent clients are not installed (set {CLIENTS_ENV}; .ci/run installs them)"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(why)
        pytest.skip(why)
    home = tmp_path / "home"
    home.mkdir()
    return Clients(folder, home)


def bundled_descriptions() -> dict[str, str]:
    out = {}
    for name in SKILLS:
        text = (REPO_ROOT / "skills" / name / "SKILL.md").read_text()
        out[name] = " ".join(str(yaml.safe_load(text.split("---")[1])["description"]).split())
    return out


def codex_skills(prompt_input: str) -> dict[str, tuple[str, str]]:
    """name -> (description, file) of every skill `codex debug prompt-input` lists; the short
    paths' roots (`r1`) expanded."""
    text = "\n".join(
        part["text"]
        for item in json.loads(prompt_input)
        for part in item.get("content", []) or []
        if isinstance(part, dict) and "<skills_instructions>" in str(part.get("text", ""))
    )
    roots = dict(re.findall(r"- `(r\d+)` = `([^`]+)`", text))
    listed = re.findall(r"^- ([\w:.-]+): (.*) \(file: (r\d+)/(\S+)\)$", text, re.M)
    return {name: (desc, f"{roots[r]}/{rel}") for name, desc, r, rel in listed}


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
    assert re.search(r"^automl-setup@automl-setup +installed, enabled +0\.1\.0 ", plugins, re.M)
    project = tmp_path / "project"
    project.mkdir()
    servers = clients.run("codex", "mcp", "list", cwd=project)
    cache = clients.home / ".codex/plugins/cache/automl-setup/automl-setup/0.1.0"
    assert re.search(rf"^automl-setup +uv +run --project \. --frozen .*{cache}", servers, re.M)
    skills = codex_skills(clients.run("codex", "debug", "prompt-input", cwd=project))
    for name, description in bundled_descriptions().items():
        assert skills[f"automl-setup:{name}"][0] == description
