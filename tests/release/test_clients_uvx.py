"""The pinned uvx entry as the real coding-agent clients see it: `init --launcher uvx --index
URL` in a user's project, this version published on a team's own index that wants a login for
every download, the clients' environment holding only the user's login for it (no uv index
setting): Claude Code (project approved) starts the server through uvx and shows it
Connected; Codex (project trusted) lists it, with the login's variables to pass."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.agent_clients import Clients
from support.cli import run_cli
from support.projects import user_project
from support.release import PackageIndex, ReleaseDists

from mcp_server.bundle.uvindex import PASSWORD_VAR, USERNAME_VAR

pytestmark = pytest.mark.slow


def test_the_uvx_entry_is_connected_in_claude_code_and_listed_by_codex(
    tmp_path: Path, private_index: PackageIndex, release_dists: ReleaseDists, clients: Clients
) -> None:
    package_index = private_index
    package_index.upload(release_dists.sdist, release_dists.wheel)
    project = user_project(tmp_path / "proj")
    done = run_cli("init", "--launcher", "uvx", "--index", package_index.simple_url, cwd=project)
    assert done.code == 0, done.output
    pinned = (
        f"uvx --index automl-setup={package_index.simple_url} --from "
        f"automl-setup=={release_dists.version} automl-setup-mcp"
    )

    login = {USERNAME_VAR: package_index.user, PASSWORD_VAR: package_index.password}
    clients = Clients(clients.bin, clients.home, login)
    clients.approve_claude_project(project, ["automl-setup", "other"])
    listed = clients.run("claude", "mcp", "list", cwd=project)
    assert re.search(rf"^automl-setup: {re.escape(pinned)} +- ✔ Connected$", listed, re.M), listed
    assert re.search(r"^other: other-server ", listed, re.M), listed  # theirs, still there
    # uvx asked the team's index for exactly that project.
    served = package_index.log.read_text(errors="replace")
    assert '"GET /simple/automl-setup/ HTTP/1.1"' in served, served[-2000:]

    clients.trust_codex_project(project)
    codex = clients.run("codex", "mcp", "list", cwd=project)
    args = pinned.removeprefix("uvx ")
    assert re.search(rf"^automl-setup +uvx +{re.escape(args)} .* enabled", codex, re.M), codex
