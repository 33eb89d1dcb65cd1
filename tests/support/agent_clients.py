"""The real coding-agent clients, Claude Code (`@anthropic-ai/claude-code`) and Codex
(`@openai/codex`) from npm, run offline with a private HOME; and what they say about the bundle's
skills. The `clients` fixture (tests/skills/conftest.py) hands a test its `Clients`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from support.cli import REPO_ROOT, outside_env

from mcp_server.children.uv import uv_binary

CLIENTS_ENV, REQUIRE_ENV = "AUTOML_AGENT_CLIENTS", "AUTOML_REQUIRE_AGENT_CLIENTS"
CLIENT_TIMEOUT_S = 180
SKILLS = sorted(p.name for p in (REPO_ROOT / "skills").iterdir() if (p / "SKILL.md").is_file())
# Anything of the developer's that could point a client at a real configuration or account.
PRIVATE = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")


def client_dir() -> Path | None:
    """The folder holding both `claude` and `codex`: $AUTOML_AGENT_CLIENTS/node_modules/.bin,
    else the folder of the `claude` on PATH; None when neither has both."""
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
    """The two clients, run with HOME (and XDG folders) in a temporary directory; `extra_env`
    is added to their environment last."""

    bin: Path
    home: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)

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
            # Offline: no telemetry or update look-ups to the vendor's hosts (Claude Code
            # tries them on every command otherwise).
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        env.update(self.extra_env)
        return env

    def attempt(self, client: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """`client ARGS` run to its end, whatever its exit code."""
        return subprocess.run(
            [str(self.bin / client), *args],
            capture_output=True, text=True, cwd=cwd, env=self.env(),
            stdin=subprocess.DEVNULL, timeout=CLIENT_TIMEOUT_S, check=False,
        )  # fmt: skip

    def run(self, client: str, *args: str, cwd: Path) -> str:
        """`client ARGS`, which must succeed; its stdout."""
        proc = self.attempt(client, *args, cwd=cwd)
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


def skill_description(skill_md: Path) -> str:
    """The description of a SKILL.md's front matter, its whitespace folded."""
    text = skill_md.read_text()
    return " ".join(str(yaml.safe_load(text.split("---")[1])["description"]).split())


def bundled_descriptions() -> dict[str, str]:
    """name -> description of every skill in this checkout's skills/."""
    return {name: skill_description(REPO_ROOT / "skills" / name / "SKILL.md") for name in SKILLS}


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
