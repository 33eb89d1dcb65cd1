"""This repository's plugin installed from a git repository, not a folder, and updated to a new
release tag, by the real clients (support/agent_clients.py) with a private HOME, offline.

The repository: this checkout's files committed as release 0.1.0 (tag `v0.1.0` on `main`) in a
bare repository, served by git's smart HTTP on 127.0.0.1 (nginx with TLS and Basic auth in
front of git-http-backend, support/remotes.py), as a private host serves it; the clients' git
finds the password in ~/.git-credentials of the private HOME. Release 0.1.1 then raises the
version of the three manifests, changes one skill's description and is tagged `v0.1.1`.

Neither client takes a `file://` URL (the first test holds them to their words), so the bare
repository is reached over https, as a user reaches theirs. Claude Code runs with
CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1: without it each of its commands looks up
api.anthropic.com (telemetry); with it, as for Codex, the git host was the only address either
client connected to (seen with `strace -f -e trace=connect`, not asserted here); every client
test runs so (support/agent_clients.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.agent_clients import SKILLS, Clients, codex_skills, skill_description
from support.engines import checkout_copy
from support.remotes import HttpsGitServer, make_tls, missing_programs

from mcp_server.source.profile import tomllib

pytestmark = pytest.mark.slow
REQUIRE_REMOTES_ENV = "AUTOML_REQUIRE_REMOTES"
PLUGIN = MARKETPLACE = "automl-setup"
PLUGIN_ID = f"{PLUGIN}@{MARKETPLACE}"
MANIFESTS = (
    ".claude-plugin/plugin.json",
    ".claude-plugin/marketplace.json",
    ".codex-plugin/plugin.json",
)
CHANGED_SKILL = "automl-slurm"
GIT = ("git", "-c", "user.name=automl-setup release", "-c", "user.email=release@localhost",
       "-c", "commit.gpgsign=false")  # fmt: skip


def git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        [*GIT, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


@dataclass(frozen=True)
class GitPlugin:
    """The plugin's repository: released from the work tree `work` into the bare repository
    `bare`, which the git host serves at `url`; `clients` reach it (their git trusts the host's
    CA and has its password)."""

    clients: Clients
    work: Path
    bare: Path
    url: str

    def release(self, version: str) -> str:
        """Release `version`: the manifests say it, and (after the first) the changed skill's
        description names it; committed on `main`, tagged `v<version>`, both pushed. The
        commit."""
        for rel in MANIFESTS:
            manifest = self.work / rel
            text, count = re.subn(
                r'"version": "[^"]*"', f'"version": "{version}"', manifest.read_text()
            )
            assert count == 1, rel
            manifest.write_text(text)
        if git("tag", "--list", cwd=self.work):
            skill = self.work / "skills" / CHANGED_SKILL / "SKILL.md"
            text = skill.read_text()
            skill.write_text(text.replace('description: "', f'description: "{version}: ', 1))
            assert skill.read_text() != text, skill
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "--allow-empty", "-m", f"automl-setup {version}", cwd=self.work)
        git("tag", f"v{version}", cwd=self.work)
        git("push", "-q", str(self.bare), "main", f"v{version}", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    def changed_description(self) -> str:
        """The changed skill's description in the work tree (the last release's)."""
        return skill_description(self.work / "skills" / CHANGED_SKILL / "SKILL.md")


@pytest.fixture
def git_plugin(tmp_path: Path, clients: Clients) -> Iterator[GitPlugin]:
    """An empty bare repository served at https://127.0.0.1:PORT/git/automl-setup.git, the work
    tree (this checkout's files, a git repository without commits) and the clients set up to
    fetch from it. Skipped without nginx, fcgiwrap, git-http-backend or openssl; failed
    instead where AUTOML_REQUIRE_REMOTES=1 (CI)."""
    missing = missing_programs("nginx", "fcgiwrap", "git-http-backend", "openssl")
    if missing:
        why = f"missing {', '.join(missing)} for the test git server (Debian: nginx-light fcgiwrap)"
        if os.environ.get(REQUIRE_REMOTES_ENV) == "1":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    tls = make_tls(tmp_path / "tls")
    server = HttpsGitServer(tmp_path / "https", tls)
    server.start()
    try:
        work = checkout_copy(tmp_path / "release")
        git("init", "-q", "-b", "main", cwd=work)
        bare = tmp_path / "automl-setup.git"
        git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
        url = server.publish(bare, "automl-setup.git")
        # What a user of a private host has: git's password store in the home.
        (clients.home / ".git-credentials").write_text(server.credential_url() + "\n")
        git("config", "--file", str(clients.home / ".gitconfig"), "credential.helper", "store",
            cwd=tmp_path)  # fmt: skip
        extra = {
            # This machine sets GIT_SSL_CAINFO (the system's bundle), which beats http.sslCAInfo.
            "GIT_SSL_CAINFO": str(tls.ca_cert),
            # A failure is git's message, never a password prompt on the developer's terminal.
            "GIT_TERMINAL_PROMPT": "0",
        }
        yield GitPlugin(dataclasses.replace(clients, extra_env=extra), work, bare, url)
    finally:
        server.stop()


def claude_entry(home: Path) -> dict[str, Any]:
    """The one record of the plugin in Claude Code's installed_plugins.json."""
    installed = json.loads((home / ".claude/plugins/installed_plugins.json").read_text())
    (entry,) = installed["plugins"][PLUGIN_ID]
    return dict(entry)


def claude_cache(home: Path, version: str) -> Path:
    return home / ".claude/plugins/cache" / MARKETPLACE / PLUGIN / version


def codex_cache(home: Path) -> Path:
    return home / ".codex/plugins/cache" / MARKETPLACE / PLUGIN


def test_neither_client_takes_a_file_url_or_a_bare_repository_path(
    tmp_path: Path, git_plugin: GitPlugin
) -> None:
    """The bare repository as a `file://` URL is refused by both clients as a source of no
    known form (their own words, which docs/agents.md quotes), by Claude Code as an `ssh://`
    URL too, and by its path as a folder without a marketplace; Claude Code takes its https URL
    without `.git` for the address of a marketplace.json to download. Nothing is added."""
    clients, bare = git_plugin.clients, git_plugin.bare
    git_plugin.release("0.1.0")
    file_url = bare.as_uri()
    no_form = "Invalid marketplace source format. Try: owner/repo, https://..., or ./path"
    for source, words in [
        (file_url, no_form),
        (f"ssh://git@127.0.0.1{bare}", no_form),
        (str(bare), f"Marketplace file not found at {bare}/.claude-plugin/marketplace.json"),
        (
            git_plugin.url.removesuffix(".git"),
            f"Failed to download marketplace from {git_plugin.url.removesuffix('.git')}: ",
        ),
    ]:
        refused = clients.attempt("claude", "plugin", "marketplace", "add", source, cwd=tmp_path)
        assert refused.returncode == 1 and words in refused.stderr, refused
    assert not (clients.home / ".claude/plugins/known_marketplaces.json").exists()

    for source, words in [
        (
            file_url,
            "invalid marketplace source format; "
            "expected owner/repo, a git URL, or a local marketplace path",
        ),
        (
            str(bare),
            f"invalid marketplace file `{bare}`: "
            "marketplace root does not contain a supported manifest",
        ),
    ]:
        refused = clients.attempt("codex", "plugin", "marketplace", "add", source, cwd=tmp_path)
        assert refused.returncode == 1 and f"Error: {words}" in refused.stderr, refused
    assert not (clients.home / ".codex/config.toml").exists()


def test_claude_code_installs_from_a_git_url_and_updates_to_the_next_tag(
    tmp_path: Path, git_plugin: GitPlugin
) -> None:
    """Claude Code adds the marketplace from the https git URL (following `main`), installs
    release 0.1.0 from it (its skills and its server, which connects), and after release
    0.1.1 is pushed `marketplace update` and `plugin update` bring 0.1.1: the installed record
    names the new tag's commit, the installed files carry the changed skill, and the server
    starts from the new folder."""
    clients, url, home = git_plugin.clients, git_plugin.url, git_plugin.clients.home
    first = git_plugin.release("0.1.0")
    added = clients.run("claude", "plugin", "marketplace", "add", url, cwd=tmp_path)
    assert f"Cloning repository (timeout: 120s): {url}\n" in added, added
    assert f"Successfully added marketplace: {MARKETPLACE}" in added, added
    known = json.loads((home / ".claude/plugins/known_marketplaces.json").read_text())
    assert known[MARKETPLACE]["source"] == {"source": "git", "url": url}
    clients.run("claude", "plugin", "install", PLUGIN_ID, cwd=tmp_path)

    entry = claude_entry(home)
    assert (entry["version"], entry["gitCommitSha"]) == ("0.1.0", first)
    assert entry["installPath"] == str(claude_cache(home, "0.1.0"))
    details = clients.run("claude", "plugin", "details", PLUGIN_ID, cwd=tmp_path)
    assert details.startswith(f"{PLUGIN} 0.1.0\n"), details
    assert re.search(rf"Skills \({len(SKILLS)}\) +{', '.join(SKILLS)}$", details, re.M), details
    assert re.search(r"MCP servers \(1\) +automl-setup ", details), details
    server = r"^plugin:automl-setup:automl-setup: uv run --project {} --frozen .*✔ Connected$"
    listed = clients.run("claude", "mcp", "list", cwd=tmp_path)
    assert re.search(server.format(re.escape(entry["installPath"])), listed, re.M), listed

    second = git_plugin.release("0.1.1")
    updated = clients.run("claude", "plugin", "marketplace", "update", MARKETPLACE, cwd=tmp_path)
    assert f"Successfully updated marketplace: {MARKETPLACE}" in updated, updated
    updated = clients.run("claude", "plugin", "update", PLUGIN_ID, cwd=tmp_path)
    assert f'Plugin "{PLUGIN}" updated from 0.1.0 to 0.1.1' in updated, updated

    entry = claude_entry(home)
    assert (entry["version"], entry["gitCommitSha"]) == ("0.1.1", second)
    root = Path(entry["installPath"])
    assert root == claude_cache(home, "0.1.1")
    assert claude_cache(home, "0.1.0").is_dir()  # the previous version's folder is left
    new = git_plugin.changed_description()
    assert new.startswith("0.1.1: ")
    assert skill_description(root / "skills" / CHANGED_SKILL / "SKILL.md") == new
    assert json.loads((root / ".claude-plugin/plugin.json").read_text())["version"] == "0.1.1"
    details = clients.run("claude", "plugin", "details", PLUGIN_ID, cwd=tmp_path)
    assert details.startswith(f"{PLUGIN} 0.1.1\n"), details
    listed = clients.run("claude", "mcp", "list", cwd=tmp_path)
    assert re.search(server.format(re.escape(str(root))), listed, re.M), listed


def test_claude_code_keeps_a_pinned_tag_until_its_entry_names_the_next(
    tmp_path: Path, git_plugin: GitPlugin
) -> None:
    """Added as `URL#v0.1.0`, the marketplace stays at that tag: with 0.1.1 pushed, `update`
    finds nothing new. Adding `URL#v0.1.1` is refused while the settings entry names v0.1.0
    (the client's words); with the entry's ref changed, the add is taken, the installed plugin
    kept, and `plugin update` brings 0.1.1."""
    clients, url, home = git_plugin.clients, git_plugin.url, git_plugin.clients.home
    first = git_plugin.release("0.1.0")
    clients.run("claude", "plugin", "marketplace", "add", f"{url}#v0.1.0", cwd=tmp_path)
    clients.run("claude", "plugin", "install", PLUGIN_ID, cwd=tmp_path)
    settings_file = home / ".claude/settings.json"
    settings = json.loads(settings_file.read_text())
    pinned = {"source": "git", "url": url, "ref": "v0.1.0"}
    assert settings["extraKnownMarketplaces"][MARKETPLACE]["source"] == pinned

    second = git_plugin.release("0.1.1")
    clients.run("claude", "plugin", "marketplace", "update", MARKETPLACE, cwd=tmp_path)
    same = clients.run("claude", "plugin", "update", PLUGIN_ID, cwd=tmp_path)
    assert f"{PLUGIN} is already at the latest version (0.1.0)" in same, same
    assert claude_entry(home)["gitCommitSha"] == first

    next_tag = ("claude", "plugin", "marketplace", "add", f"{url}#v0.1.1")
    refused = clients.attempt(*next_tag, cwd=tmp_path)
    assert (
        refused.returncode == 1
        and (
            f'Cannot add marketplace "{MARKETPLACE}": its source doesn\'t match its '
            "extraKnownMarketplaces entry in user or managed settings; add it from the source "
            "that entry lists, or change the entry."
        )
        in refused.stderr
    ), refused
    settings["extraKnownMarketplaces"][MARKETPLACE]["source"]["ref"] = "v0.1.1"
    settings_file.write_text(json.dumps(settings, indent=2))
    clients.run(*next_tag, cwd=tmp_path)
    assert claude_entry(home)["version"] == "0.1.0"  # still installed, not yet updated
    updated = clients.run("claude", "plugin", "update", PLUGIN_ID, cwd=tmp_path)
    assert f'Plugin "{PLUGIN}" updated from 0.1.0 to 0.1.1' in updated, updated
    entry = claude_entry(home)
    assert (entry["version"], entry["gitCommitSha"]) == ("0.1.1", second)
    changed = Path(entry["installPath"]) / "skills" / CHANGED_SKILL / "SKILL.md"
    assert skill_description(changed) == git_plugin.changed_description()
    assert json.loads(settings_file.read_text())["enabledPlugins"] == {PLUGIN_ID: True}

    # Removing the marketplace (the other way to change its source) uninstalls the plugin.
    removed = clients.run("claude", "plugin", "marketplace", "remove", MARKETPLACE, cwd=tmp_path)
    assert f"Also uninstalled 1 plugin from this marketplace:\n  {PLUGIN_ID}\n" in removed
    installed = json.loads((home / ".claude/plugins/installed_plugins.json").read_text())
    assert installed["plugins"] == {}


def codex_listed(clients: Clients, cwd: Path) -> str:
    """The plugin's row of `codex plugin list`: `installed, enabled` and its version."""
    plugins = clients.run("codex", "plugin", "list", cwd=cwd)
    found = re.search(rf"^{re.escape(PLUGIN_ID)} +installed, enabled +(\S+) ", plugins, re.M)
    assert found, plugins
    return found[1]


def test_codex_installs_from_a_git_url_and_upgrades_to_the_next_tag(
    tmp_path: Path, git_plugin: GitPlugin
) -> None:
    """Codex adds the marketplace from the https git URL (following `main`) and installs
    release 0.1.0 (its server and skills listed); with 0.1.1 pushed, `marketplace upgrade`
    alone brings the installed plugin to 0.1.1: the cache holds only the new version, and
    the agent's prompt carries the changed skill's description."""
    clients, url, home = git_plugin.clients, git_plugin.url, git_plugin.clients.home
    project = tmp_path / "project"
    project.mkdir()
    git_plugin.release("0.1.0")
    added = clients.run("codex", "plugin", "marketplace", "add", url, cwd=tmp_path)
    assert f"Added marketplace `{MARKETPLACE}` from {url}." in added, added
    root = home / ".codex/.tmp/marketplaces" / MARKETPLACE
    assert f"Installed marketplace root: {root}\n" in added, added
    config = tomllib.loads((home / ".codex/config.toml").read_text())
    assert config["marketplaces"][MARKETPLACE] == {"source_type": "git", "source": url}
    clients.run("codex", "plugin", "add", PLUGIN_ID, cwd=tmp_path)
    assert codex_listed(clients, tmp_path) == "0.1.0"
    servers = clients.run("codex", "mcp", "list", cwd=project)
    assert re.search(
        rf"^automl-setup +uv +run --project \. .*{codex_cache(home)}/0\.1\.0", servers, re.M
    )
    old = skill_description(git_plugin.work / "skills" / CHANGED_SKILL / "SKILL.md")
    skills = codex_skills(clients.run("codex", "debug", "prompt-input", cwd=project))
    assert skills[f"{PLUGIN}:{CHANGED_SKILL}"][0] == old

    git_plugin.release("0.1.1")
    upgraded = clients.run("codex", "plugin", "marketplace", "upgrade", MARKETPLACE, cwd=tmp_path)
    assert f"Upgraded marketplace `{MARKETPLACE}`" in upgraded, upgraded
    assert codex_listed(clients, tmp_path) == "0.1.1"
    assert sorted(p.name for p in codex_cache(home).iterdir()) == ["0.1.1"]
    skills = codex_skills(clients.run("codex", "debug", "prompt-input", cwd=project))
    assert skills[f"{PLUGIN}:{CHANGED_SKILL}"] == (
        git_plugin.changed_description(),
        f"{codex_cache(home)}/0.1.1/skills/{CHANGED_SKILL}/SKILL.md",
    )
    servers = clients.run("codex", "mcp", "list", cwd=project)
    assert f"{codex_cache(home)}/0.1.1" in servers, servers


def test_codex_keeps_a_pinned_tag_until_the_marketplace_is_added_at_the_next(
    tmp_path: Path, git_plugin: GitPlugin
) -> None:
    """Added with `--ref v0.1.0`, the marketplace stays at that tag: with 0.1.1 pushed,
    `upgrade` keeps 0.1.0. Adding it again `--ref v0.1.1` is refused while it is there (the
    client's words); removed (the installed plugin stays) and added at the new tag, `upgrade`
    brings 0.1.1."""
    clients, url, home = git_plugin.clients, git_plugin.url, git_plugin.clients.home
    git_plugin.release("0.1.0")
    marketplace = ("codex", "plugin", "marketplace")
    clients.run(*marketplace, "add", url, "--ref", "v0.1.0", cwd=tmp_path)
    clients.run("codex", "plugin", "add", PLUGIN_ID, cwd=tmp_path)
    git_plugin.release("0.1.1")
    clients.run(*marketplace, "upgrade", MARKETPLACE, cwd=tmp_path)
    assert codex_listed(clients, tmp_path) == "0.1.0"

    refused = clients.attempt(*marketplace, "add", url, "--ref", "v0.1.1", cwd=tmp_path)
    assert (
        refused.returncode == 1
        and (
            f"Error: marketplace '{MARKETPLACE}' is already added from a different source; "
            "remove it before adding this source"
        )
        in refused.stderr
    ), refused
    clients.run(*marketplace, "remove", MARKETPLACE, cwd=tmp_path)
    config = tomllib.loads((home / ".codex/config.toml").read_text())
    assert MARKETPLACE not in config.get("marketplaces", {})
    assert config["plugins"][PLUGIN_ID] == {"enabled": True}
    assert sorted(p.name for p in codex_cache(home).iterdir()) == ["0.1.0"]
    clients.run(*marketplace, "add", url, "--ref", "v0.1.1", cwd=tmp_path)
    assert codex_listed(clients, tmp_path) == "0.1.0"
    clients.run(*marketplace, "upgrade", MARKETPLACE, cwd=tmp_path)
    assert codex_listed(clients, tmp_path) == "0.1.1"
    config = tomllib.loads((home / ".codex/config.toml").read_text())
    assert config["marketplaces"][MARKETPLACE]["ref"] == "v0.1.1"
    assert config["plugins"][PLUGIN_ID] == {"enabled": True}
    changed = codex_cache(home) / "0.1.1" / "skills" / CHANGED_SKILL / "SKILL.md"
    assert skill_description(changed) == git_plugin.changed_description()
