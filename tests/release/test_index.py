"""The release artifacts through a real package index, as a team's would serve them: uploaded
with twine to pypiserver on 127.0.0.1 (credentials required), then installed from it the ways
the README gives: `uv tool install --index URL automl-setup` (then `demo` and `init`) and a pinned
`uvx --from automl-setup==<version> automl-setup-mcp` that an MCP client talks to.

uv sees the local index first (`--index`, or UV_INDEX_URL as its only one); the dependencies
it does not hold come through its redirect to PyPI, so each install also proves uv follows
that redirect."""

from __future__ import annotations

import hashlib
import json
import shutil
import urllib.request
import zipfile
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.cli import REPO_ROOT
from support.projects import user_project
from support.release import (
    DISTRIBUTION,
    PackageIndex,
    ReleaseDists,
    run_checked,
    tool_env,
    uvx_command,
)

from mcp_server.children.uv import uv_binary
from mcp_server.skills.sync import manifest

pytestmark = pytest.mark.slow
CATALOG = REPO_ROOT / "mcp_server" / "faces" / "mcp" / "catalog.json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _published(index: PackageIndex, dists: ReleaseDists) -> None:
    index.upload(dists.sdist, dists.wheel)
    assert index.files() == sorted([dists.sdist.name, dists.wheel.name])


def _install_tool(root: Path, index: PackageIndex) -> dict[str, str]:
    """The README's `uv tool install --index <team index> automl-setup`, exactly, in a private
    environment (uv's default index beside the one `--index` names), run from an empty folder;
    returns that environment, pointed at `index` for what runs next."""
    env = tool_env(root, index)
    (root / "cwd").mkdir()
    readme = {k: v for k, v in env.items() if k != "UV_INDEX_URL"}
    run_checked(
        [uv_binary(), "tool", "install", "--index", index.simple_url, DISTRIBUTION],
        env=readme, cwd=root / "cwd",
    )  # fmt: skip
    return env


def _site_packages(env: dict[str, str]) -> Path:
    (site,) = Path(env["UV_TOOL_DIR"], DISTRIBUTION).glob("lib/python3*/site-packages")
    return site


def test_an_upload_needs_the_index_credentials_and_a_release_is_never_replaced(
    package_index: PackageIndex, release_dists: ReleaseDists
) -> None:
    """Without credentials (401) or with a wrong password (403) nothing lands; twine with the
    user's password uploads both files byte for byte and the simple page lists them; the
    same files again are refused (400, as PyPI answers twine), leaving the first ones."""
    assert package_index.anonymous_upload(release_dists.wheel) == 401
    wrong = package_index.upload(release_dists.wheel, password="not-the-password", check=False)
    assert wrong.returncode != 0 and "403 Forbidden" in wrong.stdout + wrong.stderr
    assert package_index.files() == []

    _published(package_index, release_dists)
    for built in (release_dists.sdist, release_dists.wheel):
        assert _sha256(package_index.packages / built.name) == _sha256(built)
    with urllib.request.urlopen(f"{package_index.simple_url}{DISTRIBUTION}/", timeout=30) as page:
        listing = page.read().decode()
    assert release_dists.sdist.name in listing and release_dists.wheel.name in listing

    again = package_index.upload(release_dists.wheel, check=False)
    assert again.returncode != 0 and "400 Bad Request" in again.stdout + again.stderr
    assert f"Cannot upload '{release_dists.wheel.name}' since it already exists" in (
        package_index.log.read_text()
    )
    assert _sha256(package_index.packages / release_dists.wheel.name) == _sha256(
        release_dists.wheel
    )


def test_uv_tool_install_from_the_index_gives_the_versioned_cli_and_its_demo_runs(
    tmp_path: Path, package_index: PackageIndex, release_dists: ReleaseDists
) -> None:
    """`uv tool install automl-setup` takes the uploaded wheel from the index and its
    dependencies through the index's redirect to PyPI; the `automl-setup` on the tool bin
    folder prints the version and runs the whole demo."""
    _published(package_index, release_dists)
    env = _install_tool(tmp_path / "tool", package_index)

    script = shutil.which("automl-setup", path=env["PATH"])
    assert script == str(Path(env["UV_TOOL_BIN_DIR"]) / "automl-setup")
    version = run_checked([script, "--version"], env=env, cwd=tmp_path)
    # The exact build: the version and the commit it was built from.
    assert version.stdout.strip() == f"automl-setup {release_dists.build}"

    # The uploaded wheel is what was installed (its files, by RECORD hash) ...
    site = _site_packages(env)
    dist_info = site / f"automl_setup-{release_dists.version}.dist-info"
    assert (dist_info / "INSTALLER").read_text().strip() == "uv"
    with_hash = [line for line in _wheel_record(release_dists.wheel) if line.split(",")[1]]
    assert set(with_hash) <= set((dist_info / "RECORD").read_text().splitlines())
    # ... and its dependencies, which the index does not hold, came through its redirect.
    assert package_index.files() == sorted([release_dists.sdist.name, release_dists.wheel.name])
    assert list(site.glob("pydantic-*.dist-info")) and list(site.glob("mcp-*.dist-info"))

    workdir = tmp_path / "demo"
    demo = run_checked([script, "demo", "--workdir", str(workdir)], env=env, cwd=tmp_path)
    assert "DEMO OK" in demo.stdout and "DEMO FAILED" not in demo.stdout
    assert "refused, as it must be" in demo.stdout
    # What the demo recorded names the exact build that recorded it: version and commit.
    records = list(workdir.rglob(".automl-setup/engine-record.json"))
    bindings = list(workdir.rglob("binding.json"))
    assert len(records) == 2 and bindings, (records, bindings)
    made_by = {json.loads(r.read_text())["install"]["tool_version"] for r in records}
    made_by |= {json.loads(b.read_text())["tool_version"] for b in bindings}
    assert made_by == {release_dists.build}


def _wheel_record(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (record,) = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
        return archive.read(record).decode().splitlines()


def test_init_from_the_tool_install_writes_the_skills_and_registers_its_server(
    tmp_path: Path, package_index: PackageIndex, release_dists: ReleaseDists
) -> None:
    """`automl-setup init` of the tool install, in a user's repository: this checkout's skills
    in both clients' folders, its own automl-setup-mcp (inside the tool folder) in .mcp.json
    and .codex/config.toml beside the user's server; `init --check` then passes."""
    _published(package_index, release_dists)
    env = _install_tool(tmp_path / "tool", package_index)
    project = user_project(tmp_path / "my-training")

    run_checked(["automl-setup", "init"], env=env, cwd=project)

    canonical = manifest(REPO_ROOT / "skills")
    for folder in (".claude/skills", ".agents/skills"):
        for entry in canonical["files"]:
            written = project / folder / entry["path"]
            assert _sha256(written) == entry["sha256"], written
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert servers["other"] == {"command": "other-server", "args": []}
    command = Path(servers["automl-setup"]["command"])
    assert command.is_absolute() and command.name == "automl-setup-mcp"
    assert command.resolve().is_relative_to(Path(env["UV_TOOL_DIR"]).resolve())
    codex = (project / ".codex" / "config.toml").read_text()
    assert 'command = "other-server"' in codex and f'command = "{command}"' in codex
    assert (project / ".automl-setup" / "init.json").is_file()

    check = run_checked(["automl-setup", "init", "--check"], env=env, cwd=project)
    assert "init has not run here" not in check.stdout


@pytest.mark.anyio
async def test_the_uvx_pinned_server_answers_initialize_and_lists_the_repository_tools(
    tmp_path: Path, package_index: PackageIndex, release_dists: ReleaseDists
) -> None:
    """`uvx --from automl-setup==<version> automl-setup-mcp`, the entry a team commits, starts
    the uploaded release's server: `initialize` names it and its version, and `tools/list`
    gives the tools of the in-repository catalog, name for name and schema for schema."""
    _published(package_index, release_dists)
    env = tool_env(tmp_path / "tool", package_index)
    uvx = uvx_command()
    pin = f"{DISTRIBUTION}=={release_dists.version}"
    server = StdioServerParameters(
        command=uvx[0],
        args=[*uvx[1:], "--from", pin, "automl-setup-mcp"],
        env=env,
        cwd=str(tmp_path),
    )
    with (tmp_path / "server.log").open("w") as errlog, anyio.fail_after(240):
        async with Client(stdio_client(server, errlog=errlog), mode="legacy") as client:
            info = client.server_info
            listed = await client.list_tools()
    assert info is not None and (info.name, info.version) == (DISTRIBUTION, release_dists.build)
    catalog = json.loads(CATALOG.read_text())["tools"]
    assert [t.name for t in listed.tools] == [t["name"] for t in catalog]
    assert [t.input_schema for t in listed.tools] == [t["inputSchema"] for t in catalog]
    # uvx ran it from its cache: nothing was installed on the tool PATH.
    assert list(Path(env["UV_TOOL_BIN_DIR"]).iterdir()) == []
