"""Issue 43's story: a team publishes automl-setup to its own index, which wants a login for
every download. `init --launcher uvx --index URL` writes the index into the committed entry;
a teammate who clones the project, with no automl-setup installed and no uv index setting,
only their own login in uv's variables, starts that entry (the real MCP SDK client over
stdio, with the whole environment, as Claude Code passes it) and gets the pinned version's
tools, never the newer one the index also holds. `init --check` stays 0 with a key the
teammate added to the entry, and is 1 once a key init wrote is changed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from packaging.version import Version
from support.cli import run_cli
from support.projects import user_project
from support.release import PackageIndex, ReleaseDists, build_dists, copy_checkout

from mcp_server.bundle.uvindex import PASSED_VARS, PASSWORD_VAR, USERNAME_VAR
from mcp_server.source.wheelbuild import uv_binary

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
START_TIMEOUT_S = 240


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _teammate_env(root: Path, login: dict[str, str]) -> dict[str, str]:
    """A fresh teammate's environment: their own HOME and uv cache, uv and uvx alone on their
    own PATH folder (no automl-setup), no UV_* setting but their login for the index (and the
    tests' interpreter, never a download)."""
    home, bin_dir = root / "home", root / "bin"
    home.mkdir(parents=True)
    bin_dir.mkdir()
    for name in ("uv", "uvx"):
        (bin_dir / name).symlink_to(Path(uv_binary()).with_name(name))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
        and not k.startswith(("UV_", "XDG_"))
    }
    env.update(
        HOME=str(home),
        UV_CACHE_DIR=str(root / "uv-cache"),
        UV_PYTHON=sys.executable,
        UV_PYTHON_DOWNLOADS="never",
        PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
        **login,
    )
    return env


async def _tools(entry: dict, env: dict[str, str], cwd: Path) -> tuple[str, list[str]]:
    """Start the entry as Claude Code does (its command and args, the user's environment and
    the entry's `env`), and list its tools: (server version, tool names)."""
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})},
        cwd=str(cwd),
    )  # fmt: skip
    with (cwd.parent / "server.log").open("w") as errlog, anyio.fail_after(START_TIMEOUT_S):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = (await client.list_tools()).tools
            info = client.server_info
            return (info.version if info else ""), sorted(t.name for t in tools)


async def test_a_teammate_starts_the_committed_uvx_entry_from_the_teams_private_index(
    tmp_path: Path, private_index: PackageIndex, release_dists: ReleaseDists
) -> None:
    index, version = private_index, release_dists.version
    newer = f"{Version(version).major}.{Version(version).minor}.{Version(version).micro + 1}"
    tree = copy_checkout(tmp_path / "newer", newer)
    index.upload(release_dists.sdist, release_dists.wheel, *build_dists(
        tree, tmp_path / "newer-dist", release_dists.epoch
    ))  # fmt: skip
    assert {f.split("-")[1].removesuffix(".tar.gz") for f in index.files()} == {version, newer}
    with pytest.raises(urllib.error.HTTPError) as anonymous:  # the index wants a login
        urllib.request.urlopen(f"{index.simple_url}automl-setup/", timeout=30)
    assert anonymous.value.code == 401

    project = user_project(tmp_path / "proj")
    done = run_cli("init", "--launcher", "uvx", "--index", index.simple_url, cwd=project)
    assert done.code == 0, done.output
    committed = (project / ".mcp.json").read_text() + (project / ".codex/config.toml").read_text()
    assert index.password not in committed and index.simple_url in committed
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "-C", str(project), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(project), "commit", "-qm", "init"], check=True)
    clone = tmp_path / "teammate" / "proj"
    subprocess.run(["git", "clone", "-q", str(project), str(clone)], check=True)
    entry = json.loads((clone / ".mcp.json").read_text())["mcpServers"]["automl-setup"]
    codex = (clone / ".codex/config.toml").read_text()
    assert all(f'"{name}"' in codex for name in PASSED_VARS)  # Codex passes only these

    # Without a login uvx cannot fetch it: the login is what starts the server.
    bare = _teammate_env(tmp_path / "bare", {})
    uvx = shutil.which(entry["command"], path=bare["PATH"])
    assert uvx is not None and shutil.which("automl-setup-mcp", path=bare["PATH"]) is None
    refused = subprocess.run(
        [uvx, *entry["args"], "--help"], env=bare, cwd=clone, capture_output=True,
        text=True, stdin=subprocess.DEVNULL, timeout=START_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "401" in refused.stderr or "credentials" in refused.stderr.lower(), refused.stderr

    login = {USERNAME_VAR: index.user, PASSWORD_VAR: index.password}
    env = _teammate_env(tmp_path / "mate", login)
    served, tools = await _tools(entry, env, clone)
    # The pinned one, not the newer one the index also holds (served as its build, +g<commit>).
    assert served.split("+")[0] == version
    assert {"install_engine", "launch_experiment", "status_experiment"} <= set(tools), tools
    assert '"GET /simple/automl-setup/ HTTP/1.1" 200' in index.log.read_text(errors="replace")

    # The committed entry is init's by key: a teammate's own key is no edit; init's is.
    data = json.loads((clone / ".mcp.json").read_text())
    data["mcpServers"]["automl-setup"]["env"] = {"HF_HOME": "/data/hf"}
    (clone / ".mcp.json").write_text(json.dumps(data, indent=2) + "\n")
    check = run_cli("init", "--check", "--project", str(clone))
    assert check.code == 0, check.output
    data["mcpServers"]["automl-setup"]["args"] = [a for a in entry["args"] if a != "--index"]
    (clone / ".mcp.json").write_text(json.dumps(data, indent=2) + "\n")
    check = run_cli("init", "--check", "--project", str(clone))
    assert check.code == 1 and "changed since init wrote it" in check.output, check.output
