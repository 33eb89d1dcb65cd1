"""The MCP tools in process, through the SDK client: real git repositories, real installs, real
engine processes. Messages are compared with the real `automl-setup` command."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from support.cli import profile_args, run_cli
from support.engines import engine_marker
from support.mcp import (
    MODES,
    Answer,
    ProgressLog,
    call_ok,
    engine_args,
    error_text,
    finished,
    wait_for_state,
    write_manifest,
)
from support.trees import env_snapshot

from mcp_server.environment.install import STEPS
from mcp_server.experiments import status as statuses
from mcp_server.faces.mcp import calls as mcp_runtime
from mcp_server.faces.mcp.inputs import BRANCH_QUESTION
from mcp_server.faces.mcp.lifecycle import RedactingFormatter
from mcp_server.faces.mcp.server import server
from mcp_server.source.sourcerepo import SourceRepository, create_reference_repository

pytestmark = pytest.mark.anyio

TOOLS = {
    # name: (read_only, destructive, idempotent, open_world)
    "resolve_branch": (True, False, True, True),
    "list_branches": (True, False, True, True),
    "install_engine": (False, True, False, True),
    "verify_engine": (True, False, True, False),
    "diagnose_engine": (True, False, True, False),
    "launch_experiment": (False, False, False, False),
    "resume_experiment": (False, False, False, False),
    "status_experiment": (True, False, True, False),
    "list_experiments": (True, False, True, False),
    "history_engine": (True, False, True, False),
    "repair_engine": (False, True, True, True),
    "stop_experiment": (False, True, False, False),
    "logs_experiment": (True, False, True, False),
    "report_experiment": (False, False, True, False),
    "submit_slurm_job": (False, False, False, True),
    "status_slurm_job": (True, False, True, True),
    "cancel_slurm_job": (False, True, False, True),
    "watch_slurm": (False, False, False, True),
    "register_slurm_watch": (False, False, True, True),
    "store_wheels": (False, True, True, False),
    "recreate_engine": (False, False, True, True),
    "lock_experiment": (False, False, True, True),
    "track_experiment": (False, False, True, True),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class World:
    """One repository and one environment with `main` installed, shared by the tests that
    only read it (and by experiments launched on it)."""

    repo: SourceRepository
    env: Path
    root: Path

    @property
    def engine(self) -> dict[str, str]:
        return engine_args(self.repo)

    def cli(self, *args: str) -> str:
        result = run_cli(*args)
        return result.stdout.strip() if result.code == 0 else result.output


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("mcp-world")
    repo = create_reference_repository(root / "repo")  # main and dev/next
    env = root / "env"
    result = run_cli(
        "install", "--branch", "main", "--python", str(env), "--create-env", *profile_args(repo)
    )
    assert result.code == 0, result.output
    return World(repo, env, root)


def _walk_strings(schema: Any) -> list[dict[str, Any]]:
    """Every string-typed node of a JSON schema."""
    found = []
    if isinstance(schema, dict):
        if schema.get("type") == "string":
            found.append(schema)
        for value in schema.values():
            found += _walk_strings(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _walk_strings(value)
    return found


# --------------------------------------------------------------------------------------------
# Listing


async def test_tools_have_titles_hints_and_bounded_schemas() -> None:
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(TOOLS)
    for name, hints in TOOLS.items():
        tool = tools[name]
        a = tool.annotations
        assert tool.title and a is not None and a.title == tool.title, name
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == hints
        assert tool.description and tool.output_schema is not None, name
        assert "message" in tool.output_schema["properties"], name
        strings = _walk_strings(tool.input_schema)
        assert strings and all("maxLength" in s or "enum" in s for s in strings), name
    # The branch question is a resolver, not an argument the model fills in.
    assert "asked" not in tools["install_engine"].input_schema["properties"]
    assert tools["install_engine"].input_schema["required"] == ["python"]


# --------------------------------------------------------------------------------------------
# The branch question


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "answer"),
    [("auto", "main"), ("legacy", "main"), ("auto", "dev/next"), ("legacy", "dev/next")],
)
async def test_install_asks_main_or_which_branch(
    mode: str, answer: str, source_repo: SourceRepository, tmp_path: Path
) -> None:
    ask = Answer("accept", {"branch": answer})
    progress = ProgressLog()
    env = tmp_path / "env"
    args = {"python": str(env), "create_env": True, "profile": engine_args(source_repo)}
    async with Client(server, mode=mode, elicitation_callback=ask) as client:
        out = await call_ok(client, "install_engine", args, progress_callback=progress)
    (question,) = ask.seen
    assert question.message == BRANCH_QUESTION
    assert question.requested_schema["required"] == ["branch"]
    source = out["record"]["source"]
    assert out["status"] == "installed"
    assert (source["requested_ref"], source["commit"]) == (
        f"refs/heads/{answer}",
        source_repo.head(answer),
    )
    assert engine_marker(env) == {"main": "main-1", "dev/next": "dev-next-1"}[answer]
    assert out["message"].startswith("installed: automl-refengine 0.1.0 from file://")
    # Every step of the install, in order, with strictly increasing progress.
    steps = [m.split("]")[0].split()[-1] for m in progress.messages if m.startswith("[")]
    assert sorted(set(steps), key=steps.index) == list(STEPS)
    assert progress.strictly_increasing()
    assert {t for _p, t, _m in progress.events} == {len(STEPS) * 1000}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("ask", "expected"),
    [
        (Answer("decline"), "choose branch: the user declined to choose a branch"),
        (Answer("cancel"), "choose branch: the user cancelled the branch question"),
        (None, "choose branch: no branch or commit given, and this client cannot put"),
    ],
    ids=["declined", "cancelled", "no-elicitation"],
)
async def test_install_never_picks_a_branch(
    mode: str, ask: Answer | None, expected: str, source_repo: SourceRepository, tmp_path: Path
) -> None:
    env = tmp_path / "env"
    args = {"python": str(env), "create_env": True, "profile": engine_args(source_repo)}
    async with Client(server, mode=mode, elicitation_callback=ask) as client:
        text = error_text(await client.call_tool("install_engine", args), "install_engine")
    assert text.startswith(expected)
    assert "never choose" in text or "do not install" in text
    if ask is None:
        assert '"main, or which development branch?"' in text and "branch=<" in text
    assert not env.exists()  # nothing created, nothing installed


@pytest.mark.parametrize("mode", MODES)
async def test_elicited_branch_is_validated_like_any_branch(
    mode: str, source_repo: SourceRepository, tmp_path: Path
) -> None:
    env = tmp_path / "env"
    args = {"python": str(env), "create_env": True, "profile": engine_args(source_repo)}
    ask = Answer("accept", {"branch": "--upload-pack=touch"})
    async with Client(server, mode=mode, elicitation_callback=ask) as client:
        text = error_text(await client.call_tool("install_engine", args), "install_engine")
    assert text.startswith("validate branch: branch name '--upload-pack=touch' starts with '-'")
    assert not env.exists()


@pytest.mark.slow
async def test_given_branch_skips_the_question_and_shows_the_cli_message(world: World) -> None:
    ask = Answer("accept", {"branch": "dev/next"})
    args = {"python": str(world.env), "branch": "main", "profile": world.engine}
    async with Client(server, elicitation_callback=ask) as client:
        out = await call_ok(client, "install_engine", args)
    assert ask.seen == []
    assert out["status"] == "unchanged"
    cli = world.cli(
        "install", "--branch", "main", "--python", str(world.env), *profile_args(world.repo)
    )
    assert out["message"] == cli


@pytest.mark.slow
async def test_install_by_commit_sends_heartbeats(
    monkeypatch: pytest.MonkeyPatch, source_repo: SourceRepository, tmp_path: Path
) -> None:
    monkeypatch.setattr(mcp_runtime, "HEARTBEAT_S", 0.05)
    commit = source_repo.head("dev/next")
    env = tmp_path / "env"
    args = {"python": str(env), "commit": commit, "create_env": True}
    args["profile"] = engine_args(source_repo)
    progress = ProgressLog()
    async with Client(server, elicitation_callback=Answer("accept", {"branch": "main"})) as client:
        out = await call_ok(client, "install_engine", args, progress_callback=progress)
    assert out["record"]["source"]["requested_ref"] is None
    assert out["record"]["source"]["commit"] == commit
    assert sum(m.startswith("still working") for m in progress.messages) >= 3
    assert progress.strictly_increasing()


# --------------------------------------------------------------------------------------------
# Read-only tools show the command line's message


@pytest.mark.slow
async def test_read_only_tools_match_the_cli(world: World) -> None:
    python, flags = str(world.env), profile_args(world.repo)
    async with Client(server) as client:
        for branch in ("main", "dev/next"):
            out = await call_ok(
                client, "resolve_branch", {"branch": branch, "profile": world.engine}
            )
            assert out["commit"] == world.repo.head(branch)
            assert out["ref"] == f"refs/heads/{branch}"
            assert out["message"] == world.cli("resolve", "--branch", branch, *flags)
        checked = await call_ok(
            client, "verify_engine", {"python": python, "profile": world.engine}
        )
        diagnosed = await call_ok(
            client, "diagnose_engine", {"python": python, "profile": world.engine}
        )
        history = await call_ok(client, "history_engine", {"python": python})
    assert checked["verified"] is True and checked["experiment"] is None
    assert checked["status"] == "verified"
    assert checked["commit"] == world.repo.head("main")
    assert checked["message"] == world.cli("verify", "--python", python, *flags)
    verify_json = json.loads(world.cli("verify", "--python", python, *flags, "--json"))
    # The structured content is the command's --json, plus the text the command prints.
    assert {k: v for k, v in checked.items() if k != "message"} == verify_json
    assert diagnosed["record_status"] == "verified"
    assert diagnosed["message"] == world.cli("diagnose", "--python", python, *flags)
    assert [e["event"] for e in history["entries"]][:1] == ["installed"]
    assert history["message"] == world.cli("history", "--python", python)


@pytest.mark.slow
async def test_verify_engine_reports_a_tampered_engine(
    installed_env: Path, source_repo: SourceRepository
) -> None:
    (module,) = installed_env.glob("lib/python*/site-packages/automl_refengine/search.py")
    module.write_text(module.read_text() + "\n# edited\n")
    args = {"python": str(installed_env), "profile": engine_args(source_repo)}
    async with Client(server) as client:
        out = await call_ok(client, "verify_engine", args)
    assert out["verified"] is False and out["status"] == "mismatch"
    fields = [d["field"] for d in out["differences"]]
    assert "file automl_refengine/search.py" in fields
    cli = run_cli("verify", "--python", str(installed_env), *profile_args(source_repo))
    assert cli.code == 1 and out["message"] == cli.stdout.strip()


@pytest.mark.slow
async def test_verify_engine_on_an_empty_environment_explains(tmp_path: Path) -> None:
    env = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    async with Client(server) as client:
        out = await call_ok(client, "verify_engine", {"python": str(env)})
    assert out["verified"] is False and out["status"] == "no-engine"
    assert "install the core from source with one of:" in out["message"]
    assert out["message"] == run_cli("verify", "--python", str(env)).stdout.strip()


# --------------------------------------------------------------------------------------------
# Experiments


@pytest.mark.slow
async def test_launch_status_list_and_binding_check(world: World, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    manifest = write_manifest(tmp_path, "mcp-life", max_trials=3)
    python = str(world.env)
    launch = {"manifest": str(manifest), "workspace": str(ws), "python": python}
    ids = {"experiment_id": "mcp-life", "workspace": str(ws)}
    async with Client(server) as client:
        started = await call_ok(client, "launch_experiment", launch)
        assert started["detached"] is True and started["exit_code"] is None
        assert started["engine_commit"] == world.repo.head("main")
        assert Path(started["log_path"]).is_file() and Path(started["binding_path"]).is_file()
        assert started["message"].startswith(
            f"launched mcp-life on engine commit {started['engine_commit']}"
        )
        assert f"pid {started['pid']} (detached)" in started["message"]

        async def status() -> dict[str, Any]:
            return await call_ok(client, "status_experiment", ids)

        done = await wait_for_state(status, finished)
        assert done["trials_done"] == 3 and done["best"] is not None
        assert done["bound_commit"] == world.repo.head("main")
        cli_status = world.cli("status", "--experiment-id", "mcp-life", "--workspace", str(ws))
        assert done["message"] == cli_status
        listed = await call_ok(client, "list_experiments", {"workspace": str(ws)})
        assert listed["message"] == world.cli("experiments", "--workspace", str(ws))
        checked = await call_ok(client, "verify_engine", {"python": python, **ids})
        again = await client.call_tool("launch_experiment", launch)
    assert [e["experiment_id"] for e in listed["experiments"]] == ["mcp-life"]
    binding = checked["experiment"]
    assert checked["verified"] is True and binding["matches"] is True
    assert binding["differences"] == [] and binding["recreate_commands"] == []
    assert "holds exactly the bound engine" in checked["message"]
    text = error_text(again, "launch_experiment")
    assert text.startswith(f"launch: experiment mcp-life already exists in {ws}")
    # The remedy names the tool call (the command line's names the command).
    assert 'continue it with call resume_experiment with experiment_id="mcp-life", ' in text


@pytest.mark.slow
async def test_resume_on_another_engine_is_refused_with_diff_and_recreate(
    world: World, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    manifest = write_manifest(tmp_path, "mcp-bound", max_trials=1)
    other = tmp_path / "other-env"
    result = run_cli(
        "install", "--branch", "dev/next", "--python", str(other), "--create-env",
        *profile_args(world.repo),
    )  # fmt: skip
    assert result.code == 0, result.output
    ids = {"experiment_id": "mcp-bound", "workspace": str(workspace)}
    resume = {**ids, "manifest": str(manifest), "python": str(other)}
    async with Client(server) as client:
        launch = {"manifest": str(manifest), "workspace": str(workspace), "python": str(world.env)}
        await call_ok(client, "launch_experiment", launch)

        async def status() -> dict[str, Any]:
            return await call_ok(client, "status_experiment", ids)

        await wait_for_state(status, finished)
        checked = await call_ok(client, "verify_engine", {"python": str(other), **ids})
        before = env_snapshot(other)
        refused = await client.call_tool("resume_experiment", resume)
        (tmp_path / "edited").mkdir()
        wrong_manifest = write_manifest(tmp_path / "edited", "mcp-bound", max_trials=2)
        refused_manifest = await client.call_tool(
            "resume_experiment", {**resume, "manifest": str(wrong_manifest)}
        )
    binding = checked["experiment"]
    assert checked["verified"] is False and binding["matches"] is False
    fields = {d["field"] for d in binding["differences"]}
    assert "source.commit" in fields and "source.subtree_id" in fields
    assert binding["recreate_commands"][0].startswith(
        "automl-setup recreate --experiment-id mcp-bound "
    )
    text = error_text(refused, "resume_experiment")
    assert text.startswith(f"resume: the engine in {other} is not the build experiment mcp-bound")
    assert f"source.commit: recorded {world.repo.head('main')}, found " in text
    assert env_snapshot(other) == before  # a refusal changes nothing
    cli = run_cli(
        "resume", "--experiment-id", "mcp-bound", "--workspace", str(workspace),
        "--manifest", str(manifest), "--python", str(other),
    )  # fmt: skip
    # One refusal, its remedy rendered per face: commands on the command line, tool calls here.
    assert binding["recreate_commands"][0] in cli.stderr
    assert binding["recreate_commands"][1] in cli.stderr
    cause, remedy = text.split("\n  remedy: ", 1)
    assert cli.code == 1 and cli.stderr.startswith(f"error: {cause}\n  remedy: ")
    assert "call resume_experiment with " in remedy and "automl-setup" not in remedy
    assert "is not the one experiment mcp-bound was launched with" in error_text(
        refused_manifest, "resume_experiment"
    )


# --------------------------------------------------------------------------------------------
# Bad input through the protocol: a clear tool error and no side effect


HOSTILE_REFS = ["--upload-pack=touch", "a..b", "-b", "main~1", "refs/heads/main", "x\ny"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ref", HOSTILE_REFS)
async def test_hostile_refs_are_refused(
    mode: str, ref: str, source_repo: SourceRepository, tmp_path: Path
) -> None:
    env = tmp_path / "env"
    engine = engine_args(source_repo)
    async with Client(server, mode=mode) as client:
        resolved = await client.call_tool("resolve_branch", {"branch": ref, "profile": engine})
        installed = await client.call_tool(
            "install_engine",
            {"python": str(env), "branch": ref, "create_env": True, "profile": engine},
        )
    for result, tool in ((resolved, "resolve_branch"), (installed, "install_engine")):
        assert error_text(result, tool).startswith("validate branch: ")
    assert not env.exists()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "url",
    [
        "ext::sh -c touch% {payload}",
        "ext::sh%20-c%20touch%20{payload}",
        "--upload-pack=touch {payload}",
        "fd::17",
        "file://host/{payload}",
    ],
)
async def test_hostile_repository_urls_are_refused(mode: str, url: str, tmp_path: Path) -> None:
    payload, env = tmp_path / "payload", tmp_path / "env"
    engine = {"repository": url.format(payload=payload)}
    async with Client(server, mode=mode) as client:
        resolved = await client.call_tool("resolve_branch", {"branch": "main", "profile": engine})
        installed = await client.call_tool(
            "install_engine",
            {"python": str(env), "branch": "main", "create_env": True, "profile": engine},
        )
    for result, tool in ((resolved, "resolve_branch"), (installed, "install_engine")):
        text = error_text(result, tool)
        assert text.startswith(("profile: repository:", "validate repository:")), text
    assert not payload.exists() and not env.exists()


@pytest.mark.slow
async def test_hostile_install_leaves_an_installed_environment_unchanged(world: World) -> None:
    before = env_snapshot(world.env)
    python = str(world.env)
    attempts = [
        {"branch": "--upload-pack=touch"},
        {"branch": "main", "commit": world.repo.head("main")},
        {"commit": "abc123"},
        {"branch": "no-such-branch", "profile": world.engine},
        {"branch": "main", "extras": ["--editable"], "profile": world.engine},
        {"branch": "main", "profile": {**world.engine, "subdirectory": "../outside"}},
    ]
    async with Client(server) as client:
        texts = [
            error_text(
                await client.call_tool("install_engine", {"python": python, **a}), "install_engine"
            )
            for a in attempts
        ]
    assert texts[0].startswith("validate branch:")
    assert texts[1].startswith("validate: more than one of a branch, a commit and a wheel were")
    assert texts[2].startswith("validate commit: 'abc123' is not a full commit id")
    assert texts[3].startswith("resolve: branch 'no-such-branch' does not exist on file://")
    assert texts[4].startswith("validate extra: '--editable' is not a valid extra name")
    assert texts[5].startswith("validate subdirectory: subdirectory '../outside' contains")
    assert env_snapshot(world.env) == before


WS = "<workspace>"  # replaced by a fresh path: no tool may create it


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        (
            "status_experiment",
            {"experiment_id": "nope", "workspace": WS},
            "status: no experiment 'nope' launched",
        ),
        (
            "status_experiment",
            {"experiment_id": "../x", "workspace": WS},
            "validate experiment id: '../x' is not",
        ),
        (
            "resume_experiment",
            {"experiment_id": "nope", "workspace": WS, "manifest": "/no.yaml", "python": "/no"},
            "resume: no experiment 'nope' launched by automl-setup in",
        ),
        (
            "verify_engine",
            {"experiment_id": "nope", "python": sys.prefix},
            "verify: an experiment id and a workspace go together",
        ),
        (
            "verify_engine",
            {"experiment_id": "nope", "workspace": WS, "python": sys.prefix},
            "read binding: experiment nope has no binding",
        ),
        (
            "launch_experiment",
            {"manifest": "/nonexistent/m.yaml", "workspace": WS, "python": sys.prefix},
            "read manifest: cannot read manifest /nonexistent/m.yaml",
        ),
        ("history_engine", {"python": "/nonexistent/env"}, "locate environment: /nonexistent/env"),
        (  # one rule for paths on both faces: the value type's (mcp_server/values.py)
            "launch_experiment",
            {"manifest": "m\x00", "workspace": WS, "python": "/p"},
            "read manifest: the manifest path is empty, too long or contains a control character",
        ),
    ],
)
async def test_unknown_things_are_clear_errors(
    mode: str, tool: str, args: dict[str, Any], expected: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    args = {k: str(workspace) if v == WS else v for k, v in args.items()}
    async with Client(server, mode=mode) as client:
        text = error_text(await client.call_tool(tool, args), tool)
    assert text.startswith(expected), text
    assert not workspace.exists()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("install_engine", {"python": 123}, "python"),
        ("install_engine", {"python": "/x", "create_env": "yes"}, "create_env"),
        ("install_engine", {"python": "/x", "extras": "dev"}, "extras"),
        ("install_engine", {"python": "/x", "branch": ["main"]}, "branch"),
        ("install_engine", {"python": "/x", "branch": "b" * 201}, "branch"),
        ("install_engine", {"python": "/x", "profile": {"repo": "x"}}, "profile.repo"),
        ("resolve_branch", {}, "branch"),
        ("resolve_branch", {"branch": ""}, "branch"),
        ("status_experiment", {"experiment_id": 7, "workspace": "/w"}, "experiment_id"),
        ("list_experiments", {"workspace": None}, "workspace"),
    ],
)
async def test_wrong_types_are_refused_by_the_schema(
    mode: str,
    tool: str,
    args: dict[str, Any],
    field: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    async with Client(server, mode=mode, elicitation_callback=Answer("decline")) as client:
        text = error_text(await client.call_tool(tool, args), tool)
    assert "validation error" in text and field in text, text
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# Unexpected failures


async def test_unexpected_exceptions_stay_generic(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(query: object) -> None:
        raise RuntimeError("internal detail https://user:s3cret@example.com/x")

    monkeypatch.setattr(statuses, "experiment_status", explode)  # the row loads it per call
    caplog.set_level(logging.INFO)
    async with Client(server) as client:
        result = await client.call_tool(
            "status_experiment", {"experiment_id": "x", "workspace": "/w"}
        )
    assert result.is_error and result.content[0].text == "Error executing tool status_experiment"  # type: ignore[union-attr]
    crash = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert crash and crash[0].exc_info is not None  # the traceback goes to the server's log
    formatted = RedactingFormatter("%(message)s").format(crash[0])
    assert "internal detail" in formatted and "s3cret" not in formatted
