"""The automl-setup skill's steps executed literally, as an agent runs them, against a local
engine repository named only in a project file: no profile flags, no --python, no --workspace.
Step 0 `config show` → 1 `branches` → 2 `resolve` → 3 `install --branch --expect-commit` →
4 `verify` → 6 `launch` → `status` → `logs` → `stop` → the `resume_command` status gave →
`status`; then the same chain through the MCP client, rooted at the project. Everything real:
git, uv, engine processes and signals, the SDK client."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from support.cli import CliResult, run_cli
from support.engines import engine_marker
from support.experiments import Reaper, wait_for, write_manifest
from support.mcp import Roots, call_ok
from support.refengine import holding

from mcp_server.faces.mcp.server import server
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

pytestmark = pytest.mark.slow
TABLE = "[tool.automl-setup]"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _project(root: Path, repo: SourceRepository) -> Path:
    """A user's project whose pyproject.toml names the engine, its environment and workspace."""
    project = root / "study"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        "\n".join(
            [
                '[project]\nname = "study"\nversion = "0"\n',
                TABLE,
                'workspace = "runs"',
                'python = ".venv-train"',
                "[tool.automl-setup.engine]",
                f'repository = "{repo.url}"',
                'subdirectory = "packages/automl-core"',
                f'distribution = "{REFERENCE_DISTRIBUTION}"',
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return project


def _json(result: CliResult) -> Any:
    assert result.code == 0, result.output
    return json.loads(result.stdout)


def test_the_skill_steps_on_the_command_line_with_only_a_project_file(
    tmp_path: Path, reaper: Reaper
) -> None:
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine("main", marker="main-1")
    repo.commit_engine("dev/next", base="main", marker="dev-next-1")
    project = _project(tmp_path, repo)
    label = f"{project / 'pyproject.toml'} {TABLE}"

    def cli(*args: str) -> CliResult:
        return run_cli(*args, cwd=project)

    # 0. Which engine: the project file's, and every later step says so.
    settings = _json(cli("config", "show", "--json"))
    assert settings["engine"]["repository"] == repo.url and settings["engine"]["source"] == label
    # 1-2. The branches that exist, and the commit of the one the user chose.
    heads = {b["branch"]: b["commit"] for b in _json(cli("branches", "--json"))["branches"]}
    assert heads == {"main": repo.head("main"), "dev/next": repo.head("dev/next")}
    resolved = _json(cli("resolve", "--branch", "dev/next", "--json"))
    assert resolved["commit"] == heads["dev/next"]
    # 3. Install exactly the confirmed commit; the record keeps the branch.
    confirmed = ("--branch", "dev/next", "--expect-commit", resolved["commit"])
    installed = _json(cli("install", *confirmed, "--create-env", "--json"))
    env = project / ".venv-train"
    assert installed["record"]["source"]["requested_ref"] == "refs/heads/dev/next"
    assert installed["profile_source"]["source"] == label
    assert engine_marker(env) == "dev-next-1"
    # 4. Verify.
    assert _json(cli("verify", "--json"))["status"] == "verified"

    # 6. Launch, watch, read the log, stop, resume with the command status gives, finish.
    hold = tmp_path / "hold"
    manifest = write_manifest(project / "m.yaml", experiment_id="daily", max_trials=12, hold=hold)
    ids = ("--experiment-id", "daily")

    def status() -> Any:
        return _json(cli("status", *ids, "--json"))

    # The second trial cannot finish before `stop`: the engine is surely still running then.
    with holding(hold, 1):
        started = _json(cli("launch", "--manifest", str(manifest), "--detach", "--json"))
        reaper.adopt(started["pid"])
        assert started["engine_commit"] == resolved["commit"]
        wait_for("a finished trial", lambda: (status()["trials_done"] or 0) >= 1)
        running = status()
        assert running["planned_trials"] == 12 and running["trials"]
        log = _json(cli("logs", *ids, "--json"))
        assert log["source"] == "attempt" and "trial 00000" in log["text"]
        stopped = _json(cli("stop", *ids, "--json"))
        assert stopped["stopped"] and stopped["state"] == "interrupted"
        assert reaper.reap(started["pid"]) == 143

    interrupted = status()
    assert interrupted["state"] == "interrupted"
    command = shlex.split(interrupted["resume_command"])
    assert command[:2] == ["automl-setup", "resume"]
    resumed = run_cli(*command[1:], cwd=project)
    assert resumed.code == 0, resumed.output
    done = status()
    assert done["state"] == "completed" and done["trials_done"] == 12
    assert done["bound_commit"] == resolved["commit"]
    attempts = [
        json.loads(line)
        for line in (project / "runs" / ".automl-setup" / "daily" / "attempts.jsonl")
        .read_text()
        .splitlines()
    ]
    assert [(a["action"], a["outcome"]) for a in attempts] == [
        ("launch", "accepted"),
        ("stop", "stopped"),
        ("resume", "accepted"),
        ("exit", "exited"),
    ]


@pytest.mark.anyio
async def test_the_skill_steps_through_the_mcp_client_rooted_at_the_project(
    tmp_path: Path,
) -> None:
    """The server reaps the engines it starts (here, in this process): the test watches their
    state through the tools, as an agent does."""
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine("main", marker="main-1")
    repo.commit_engine("dev/next", base="main", marker="dev-next-1")
    project = _project(tmp_path, repo)
    env, workspace = project / ".venv-train", project / "runs"
    hold = tmp_path / "hold"
    manifest = write_manifest(project / "m.yaml", experiment_id="daily", max_trials=12, hold=hold)
    roots = Roots(project, repo.bare)
    ids = {"experiment_id": "daily", "workspace": str(workspace)}

    async with Client(server, list_roots_callback=roots) as client:
        listed = await call_ok(client, "list_branches", {})
        assert {b["branch"] for b in listed["branches"]} == {"main", "dev/next"}
        resolved = await call_ok(client, "resolve_branch", {"branch": "main"})
        installed = await call_ok(
            client,
            "install_engine",
            {
                "branch": "main",
                "expect_commit": resolved["commit"],
                "python": str(env),
                "create_env": True,
            },
        )
        assert installed["record"]["source"]["requested_ref"] == "refs/heads/main"
        assert (await call_ok(client, "verify_engine", {"python": str(env)}))["verified"]

        async def until(what: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
            for _ in range(1500):
                status = await call_ok(client, "status_experiment", ids)
                if check(status):
                    return status
                await anyio.sleep(0.02)
            raise AssertionError(f"timed out waiting for {what}")

        # The second trial cannot finish before the stop: the engine is surely still running.
        with holding(hold, 1):
            started = await call_ok(
                client,
                "launch_experiment",
                {"manifest": str(manifest), "workspace": str(workspace), "python": str(env)},
            )
            await until("a finished trial", lambda s: (s["trials_done"] or 0) >= 1)
            log = await call_ok(client, "logs_experiment", ids)
            assert "trial 00000" in log["text"]
            stopped = await call_ok(client, "stop_experiment", ids)
            assert stopped["stopped"] and stopped["state"] == "interrupted"
            assert stopped["pid"] == started["pid"]
        again = await call_ok(
            client,
            "resume_experiment",
            {**ids, "manifest": str(manifest), "python": str(env)},
        )
        assert again["engine_commit"] == resolved["commit"]
        final = await until("the end", lambda s: s["state"] == "completed")
    assert final["state"] == "completed" and final["trials_done"] == 12
    assert engine_marker(env) == "main-1"
