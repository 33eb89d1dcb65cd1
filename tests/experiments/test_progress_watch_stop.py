"""Progress and control: install progress on a terminal and off it, trial
progress of a foreground launch, `status` with the trials table and the resume command, `logs`
(command line and MCP tool, one bounded tail), `stop` of the real engine with real signals (and
never of a pid that is no longer ours), remedies rendered per face, tool descriptions and output
schemas, and MCP resources and `file://` repositories confined to the client's roots.

One repository and one environment for the module (installed once, on a pseudo-terminal);
everything real: git, uv, engine processes, signals, the SDK client."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import mcp.types as types
import pytest
from mcp import Client
from support.cli import profile_args, run_cli
from support.engines import make_venv, new_source_repo
from support.experiments import Experiment, Reaper, wait_for, write_manifest
from support.mcp import Roots, call_ok, error_text
from support.trees import tree_digest

from mcp_server.environment.install import STEPS
from mcp_server.faces.cli.progress import CliProgress
from mcp_server.faces.mcp.resources import environment_uri, experiment_uri
from mcp_server.faces.mcp.server import server
from mcp_server.source.sourcerepo import SourceRepository

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-m", "mcp_server.faces.cli"]
# The tools whose every output field carries a description (the operations of issues 2-5, 19).
DESCRIBED = (
    *("resolve_branch", "install_engine", "verify_engine", "diagnose_engine", "repair_engine"),
    *("history_engine", "launch_experiment", "resume_experiment", "status_experiment"),
    *("list_experiments", "stop_experiment", "logs_experiment"),
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class World:
    root: Path
    repo: SourceRepository
    env: Path
    pty_stderr: str
    pty_stdout: str


def on_pty(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run argv with its stderr on a pseudo-terminal (what a person sees); exit, stdout, stderr."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    return proc.wait(), out, seen.decode().replace("\r\n", "\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("watch")
    repo = new_source_repo(root / "repo")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["AUTOML_SETUP_HEARTBEAT_S"] = "0.2"
    argv = [*CLI, "install", "--branch", "main", "--python", str(root / "env"), "--create-env"]
    code, out, err = on_pty([*argv, *profile_args(repo)], env)
    assert code == 0, out + err
    return World(root, repo, root / "env", err, out)


def ids(exp: Experiment) -> list[str]:
    return ["--experiment-id", exp.experiment_id, "--workspace", str(exp.workspace)]


def without_ledger(workspace: Path) -> dict[str, str]:
    return tree_digest(workspace, skip=lambda rel: rel.name == "attempts.jsonl")


# --------------------------------------------------------------------------------------------
# Progress


def test_install_shows_every_step_and_a_heartbeat_on_a_terminal(world: World) -> None:
    lines = world.pty_stderr.splitlines()
    for number, step in enumerate(STEPS, start=1):
        assert any(line.startswith(f"[{number}/{len(STEPS)} {step}] ") for line in lines), step
    beats = [line for line in lines if "still running" in line]
    assert beats and all(line.split("]")[0].split()[-1] in ("build", "install") for line in beats)
    assert world.pty_stdout.startswith("installed: automl-refengine")


def test_off_a_terminal_progress_is_plain_lines_and_with_json_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOML_SETUP_HEARTBEAT_S", "0.05")
    read, write = os.pipe()
    with os.fdopen(write, "w") as stream:
        progress = CliProgress(enabled=True, stream=stream)
        progress("build", "building the wheel")
        time.sleep(0.3)  # six heartbeats on a terminal
        progress("check", "wheel metadata")
        progress.close()
    with os.fdopen(read) as pipe:
        assert pipe.read().splitlines() == [
            "[3/7 build] building the wheel",
            "[4/7 check] wheel metadata",
        ]

    again = run_cli(
        "install", "--branch", "main", "--python", str(world.env), "--json",
        *profile_args(world.repo),
    )  # fmt: skip
    assert again.code == 0, again.output
    assert json.loads(again.stdout)["status"] == "unchanged"
    assert "[1/7 resolve]" not in again.stderr and "still running" not in again.stderr


# --------------------------------------------------------------------------------------------
# A foreground launch, its status and its logs


@dataclass
class Foreground(Experiment):
    launch_stderr: str = ""


@pytest.fixture(scope="module")
def finished(world: World) -> Foreground:
    """Three trials run in the foreground through the command line (progress on stderr)."""
    manifest = write_manifest(world.root / "fg.yaml", experiment_id="fg", max_trials=3, sleep=1.0)
    exp = Foreground(manifest, world.root / "ws", world.env, "fg")
    result = exp.cli("launch")
    assert result.code == 0, result.output
    exp.launch_stderr = result.stderr
    return exp


def test_a_foreground_launch_reports_trials_best_and_elapsed(finished: Foreground) -> None:
    lines = finished.launch_stderr.splitlines()
    trial_lines = [line for line in lines if line.startswith("[trials] ")]
    assert trial_lines, finished.launch_stderr
    assert all(" of 3 done, " in line and ", elapsed " in line for line in trial_lines)
    assert any("best so far loss=" in line for line in trial_lines)


def test_status_shows_planned_trials_and_the_trials_table(finished: Foreground) -> None:
    data = finished.status()
    assert data["state"] == "completed" and data["planned_trials"] == 3
    assert data["resume_command"] is None
    assert [t["index"] for t in data["trials"]] == [0, 1, 2]
    assert all(t["state"] == "succeeded" and t["value"] is not None for t in data["trials"])
    text = run_cli("status", *ids(finished)).stdout
    assert "trials done: 3 of 3 planned" in text
    rows = [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert [row[:2] for row in rows] == [["0", "succeeded"], ["1", "succeeded"], ["2", "succeeded"]]
    for row, trial in zip(rows, data["trials"], strict=True):
        assert float(row[2]) == pytest.approx(trial["value"], rel=1e-5)
        assert json.loads(" ".join(row[3:])) == trial["params"]


@pytest.mark.anyio
async def test_logs_of_an_attempt_and_a_trial_from_both_faces(finished: Foreground) -> None:
    attempt = run_cli("logs", *ids(finished), "--json")
    assert attempt.code == 0, attempt.output
    tail = json.loads(attempt.stdout)
    assert (tail["source"], tail["attempt"], tail["truncated"]) == ("attempt", 1, False)
    assert "trial 00002 succeeded" in tail["text"] and "experiment completed" in tail["text"]
    text = run_cli("logs", *ids(finished)).stdout
    assert text.startswith(f"== fg attempt 1: {tail['path']} (") and tail["text"].strip() in text

    trial = json.loads(run_cli("logs", *ids(finished), "--trial", "1", "--json").stdout)
    assert trial["source"] == "trial" and trial["path"].endswith("trial-00001")
    assert "== stdout ==" in trial["text"] and "loss " in trial["text"]

    before = tree_digest(finished.workspace)
    missing = run_cli("logs", *ids(finished), "--trial", "7")
    assert (
        missing.code == 1 and "trial 7 of fg" in missing.stderr and "not started" in missing.stderr
    )
    assert tree_digest(finished.workspace) == before

    args = {"experiment_id": "fg", "workspace": str(finished.workspace)}
    async with Client(server) as client:
        got = await call_ok(client, "logs_experiment", args)
        by_trial = await call_ok(client, "logs_experiment", {**args, "trial": 1})
    assert got["text"] == tail["text"] and got["message"] == text.rstrip("\n")
    assert by_trial["text"] == trial["text"]


# --------------------------------------------------------------------------------------------
# Stop


@pytest.fixture(scope="module")
def running_id(world: World) -> Experiment:
    manifest = write_manifest(world.root / "long.yaml", experiment_id="long", max_trials=40)
    return Experiment(manifest, world.root / "ws", world.env, "long")


def start(exp: Experiment, reaper: Reaper, command: str) -> int:
    """Start the engine detached and wait until it finished a trial of its own (a resume
    starts with the trials of the attempts before it already done)."""
    done = exp.trials_done() if exp.engine_dir.exists() else 0
    result = exp.cli(command, "--detach", "--json")
    assert result.code == 0, result.output
    pid = reaper.adopt(json.loads(result.stdout)["pid"])
    wait_for("a finished trial", lambda: exp.trials_done() > done)
    return pid


def test_stop_sends_sigterm_waits_and_records_what_the_ledger_says(
    running_id: Experiment, reaper: Reaper
) -> None:
    exp = running_id
    pid = start(exp, reaper, "launch")

    stopped = run_cli("stop", *ids(exp), "--json")

    assert stopped.code == 0, stopped.output
    result = json.loads(stopped.stdout)
    assert (result["pid"], result["signals"], result["stopped"]) == (pid, ["SIGTERM"], True)
    assert result["state"] == "interrupted"
    assert reaper.reap(pid) == 143  # the engine saved its state and exited on SIGTERM
    last = exp.attempts()[-1]
    assert (last["action"], last["outcome"], last["pid"]) == ("stop", "stopped", pid)
    assert last["attempt"] == result["attempt"] and "SIGTERM" in last["reason"]

    status = exp.status()
    assert status["state"] == "interrupted" and status["planned_trials"] == 40
    command = (
        f"automl-setup resume --experiment-id long --workspace {exp.workspace} "
        f"--manifest {exp.manifest} --python {exp.env}"
    )
    assert status["resume_command"] == command
    assert f"  resume: {command}" in run_cli("status", *ids(exp)).stdout.splitlines()

    # Nothing runs now: refused, nothing signalled or changed but the ledger's refusal line.
    before, count = without_ledger(exp.workspace), len(exp.attempts())
    again = run_cli("stop", *ids(exp))
    assert again.code == 1, again.output
    assert "stop: experiment long is not running" in again.stderr
    assert f"automl-setup status --experiment-id long --workspace {exp.workspace}" in again.stderr
    assert without_ledger(exp.workspace) == before
    refused = exp.attempts()[count:]
    assert [(e["action"], e["outcome"]) for e in refused] == [("stop", "refused")]


def _proc_state(pid: int) -> str:
    """The state letter of /proc/PID/stat ("T": stopped by a signal)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def forge_pid(exp: Experiment, pid: int) -> tuple[bytes, bytes]:
    """The last accepted attempt now names `pid`: what a reused pid looks like. The ledger as
    it was, and as forged."""
    original = exp.attempts_path.read_bytes()
    entries = [json.loads(line) for line in original.splitlines()]
    last = max(i for i, e in enumerate(entries) if e["outcome"] == "accepted")
    entries[last]["pid"] = pid
    forged = b"".join(json.dumps(e).encode() + b"\n" for e in entries)
    exp.attempts_path.write_bytes(forged)
    return original, forged


@pytest.mark.anyio
async def test_stop_never_signals_a_pid_that_is_not_its_engine_then_kills_the_engine(
    running_id: Experiment, reaper: Reaper
) -> None:
    exp = running_id
    engine = start(exp, reaper, "resume")
    stranger = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
    try:
        original, forged = forge_pid(exp, stranger.pid)
        refused = run_cli("stop", *ids(exp), "--kill", "--grace", "0")
        assert refused.code == 1, refused.output
        assert f"pid {stranger.pid} of attempt " in refused.stderr
        assert "is now another process" in refused.stderr
        assert "nothing was signalled" in refused.stderr
        assert stranger.poll() is None  # not signalled
        assert os.waitpid(engine, os.WNOHANG) == (0, 0)  # nor was the engine
        assert exp.attempts()[-1]["outcome"] == "refused"
    finally:
        stranger.kill()
        stranger.wait()
    exp.attempts_path.write_bytes(original + exp.attempts_path.read_bytes()[len(forged) :])

    follow = subprocess.Popen(
        [*CLI, "logs", *ids(exp), "--follow"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # An engine that cannot exit within the grace, whatever the machine's speed: stopped, it
    # keeps its lock and its SIGTERM pending (a live engine may exit before the lock is first
    # checked, and then no SIGKILL is due). Signalled only now that the refusal is checked.
    os.kill(engine, signal.SIGSTOP)
    wait_for("the engine stopped", lambda: _proc_state(engine) == "T")
    async with Client(server) as client:
        args = {"experiment_id": "long", "workspace": str(exp.workspace)}
        result = await call_ok(client, "stop_experiment", {**args, "kill": True, "grace": 0})
    assert result["signals"] == ["SIGTERM", "SIGKILL"] and result["stopped"] is True
    assert result["message"].startswith(f"stop long: SIGTERM then SIGKILL to pid {engine}")
    assert reaper.reap(engine) in (143, -9)
    out, err = follow.communicate(timeout=30)  # --follow ends once the engine is gone
    assert follow.returncode == 0, err
    assert out.startswith("== long attempt ") and "succeeded loss=" in out
    assert exp.status()["state"] == "interrupted"


# --------------------------------------------------------------------------------------------
# Remedies per face


@pytest.mark.anyio
async def test_a_remedy_names_commands_on_the_cli_and_tool_calls_over_mcp(
    world: World, finished: Foreground
) -> None:
    bare = make_venv(world.root / "bare")
    launch = ["--manifest", str(finished.manifest), "--workspace", str(finished.workspace)]
    resume = [*ids(finished), "--manifest", str(finished.manifest)]
    cli_exists = run_cli("launch", *launch, "--python", str(world.env))
    cli_no_engine = run_cli("resume", *resume, "--python", str(bare))
    fresh = world.root / "fresh.yaml"
    write_manifest(fresh, experiment_id="fresh", max_trials=1)
    cli_not_installed = run_cli("launch", "--manifest", str(fresh), "--workspace",
                                str(world.root / "ws2"), "--python", str(bare))  # fmt: skip
    ws = {"experiment_id": "fg", "workspace": str(finished.workspace)}
    async with Client(server) as client:
        mcp_exists = await client.call_tool(
            "launch_experiment",
            {"manifest": str(finished.manifest), "workspace": ws["workspace"],
             "python": str(world.env)},
        )  # fmt: skip
        mcp_no_engine = await client.call_tool(
            "resume_experiment", {**ws, "manifest": str(finished.manifest), "python": str(bare)}
        )
        mcp_not_installed = await client.call_tool(
            "launch_experiment",
            {"manifest": str(fresh), "workspace": str(world.root / "ws2"), "python": str(bare)},
        )
        mcp_not_running = await client.call_tool("stop_experiment", ws)

    resume_cli = f"automl-setup resume --experiment-id fg --workspace {finished.workspace}"
    assert cli_exists.code == 1 and f"continue it with {resume_cli}" in cli_exists.stderr
    text = error_text(mcp_exists, "launch_experiment")
    assert 'continue it with call resume_experiment with experiment_id="fg", ' in text
    assert "automl-setup" not in text.split("remedy:")[1]

    # The recreate-then-resume remedy: commands on lines of their own, or tool calls.
    cli_remedy = cli_no_engine.stderr.split("remedy:")[1]
    commands = [line.strip() for line in cli_remedy.splitlines() if line.startswith("    ")]
    assert cli_no_engine.code == 1 and len(commands) == 2, cli_no_engine.stderr
    assert commands[1].startswith("automl-setup resume --experiment-id fg ")
    text = error_text(mcp_no_engine, "resume_experiment")
    remedy = text.split("remedy:")[1]
    calls = [line.strip() for line in remedy.splitlines() if line.startswith("    ")]
    tools = [c.split()[1] for c in calls]
    assert [c.split()[0] for c in calls] == ["call", "call"] and tools[1] == "resume_experiment"
    assert tools[0] == f"{commands[0].split()[1]}_engine" and "create_env=true" in calls[0]
    assert "automl-setup" not in remedy
    # The same refusal otherwise: cause and details are the command line's, word for word.
    assert (
        text.split("remedy:")[0] == cli_no_engine.stderr.removeprefix("error: ").split("remedy:")[0]
    )

    assert cli_not_installed.code == 3
    assert f"automl-setup install --branch BRANCH --python {bare}" in cli_not_installed.stderr
    text = error_text(mcp_not_installed, "launch_experiment")
    assert f'call install_engine with branch="BRANCH", python="{bare}"' in text

    text = error_text(mcp_not_running, "stop_experiment")
    assert text.startswith("stop: experiment fg is not running")
    assert f'call status_experiment with experiment_id="fg", workspace="{ws["workspace"]}"' in text


# --------------------------------------------------------------------------------------------
# What the tools publish


@pytest.mark.anyio
async def test_tool_descriptions_are_plain_and_output_fields_described() -> None:
    async with Client(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for tool in tools.values():
        text = tool.description or ""
        assert text == text.strip() and "\n " not in text and "  " not in text, tool.name
    for name in DESCRIBED:
        schema = tools[name].output_schema or {}
        undescribed = [k for k, v in schema["properties"].items() if "description" not in v]
        assert not undescribed, (name, undescribed)
    state = tools["status_experiment"].output_schema["properties"]["state"]  # type: ignore[index]
    assert set(state["enum"]) == {
        "running", "interrupted", "completed", "cancelled", "failed", "unknown",
    }  # fmt: skip


# --------------------------------------------------------------------------------------------
# Roots: resources and file:// repositories


async def read(client: Client, uri: str) -> str:
    result = await client.read_resource(uri)
    content = result.contents[0]
    assert isinstance(content, types.TextResourceContents)
    return content.text


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_resources_and_local_repositories_are_confined_to_the_roots(
    mode: str, world: World, finished: Foreground
) -> None:
    ws = str(finished.workspace)
    uris = [
        environment_uri(str(world.env), "record"),
        experiment_uri(ws, "fg", "status"),
        experiment_uri(ws, "fg", "log/1"),
    ]
    resolve = {"branch": "main", "profile": {"repository": world.repo.url}}
    elsewhere = world.root / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    before = tree_digest(world.root, skip=lambda rel: rel.name == "lock")
    async with Client(server, mode=mode, list_roots_callback=Roots(elsewhere)) as client:
        for uri in uris:
            with pytest.raises(Exception) as refused:
                await read(client, uri)
            assert "check roots: " in str(refused.value) and elsewhere.as_uri() in str(
                refused.value
            )
        result = await client.call_tool("resolve_branch", resolve)
        text = error_text(result, "resolve_branch")
        assert text.startswith(f"check roots: repository {world.repo.url}")
    assert tree_digest(world.root, skip=lambda rel: rel.name == "lock") == before

    async with Client(server, mode=mode, list_roots_callback=Roots(world.root)) as client:
        record = json.loads(await read(client, uris[0]))
        assert record["source"]["commit"] == world.repo.head("main")
        assert json.loads(await read(client, uris[1]))["state"] == "completed"
        assert "trial 00002 succeeded" in await read(client, uris[2])
        resolved = await call_ok(client, "resolve_branch", resolve)
        assert resolved["commit"] == world.repo.head("main")
