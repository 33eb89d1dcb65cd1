"""Start-up cost: what a command imports, and what the MCP server's start-up skips.

Each command is run as a real process that records which top-level packages it imported; the
CLI's `--help` and `verify` must not import the MCP SDK (three quarters of a second) or
GitPython (no longer used: its import ran `git version` twice): a person runs them dozens of
times a day.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE

import pytest
from support.cli import profile_args
from support.refengine import manifest_data, write_manifest

from mcp_server.children.bound import Watch
from mcp_server.children.git import run_git
from mcp_server.children.run import wait_exit
from mcp_server.errors import SetupError
from mcp_server.faces.mcp.catalog import live_catalog, render
from mcp_server.faces.mcp.sdk import CATALOG_PATH
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

# Runs the command line as `automl-setup ARGS` would, then prints the modules it imported on
# the last line (after everything the command printed).
RUN_AND_LIST = """
import sys
from mcp_server.faces.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("\\nIMPORTED " + " ".join(sorted(sys.modules)))
sys.exit(code)
"""
HEAVY = {"mcp", "git"}
# What a launch does not run: operations import their area when they run (operations.py).
NOT_LAUNCH = (
    "mcp_server.slurm.submit",
    "mcp_server.slurm.watcher",
    "mcp_server.slurm.jobs",
    "mcp_server.report",
    "mcp_server.environment.install",
)


def imported_by(*args: str) -> tuple[int, str, set[str]]:
    """Exit code, output and the modules (packages included) `automl-setup ARGS` imported."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    proc = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=120,
        check=False,
    )
    output, _, listed = proc.stdout.rpartition("\nIMPORTED ")
    assert listed, proc.stdout + proc.stderr
    return proc.returncode, output + proc.stderr, set(listed.split())


@pytest.mark.slow
@pytest.mark.shares_installed_env
def test_help_and_verify_import_neither_the_mcp_sdk_nor_gitpython(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    code, output, packages = imported_by("--help")
    assert code == 0 and "install" in output, output
    assert packages & HEAVY == set()

    args = ("verify", "--python", str(installed_env), *profile_args(source_repo))
    code, output, packages = imported_by(*args)
    assert code == 0, output
    assert output.startswith(f"verified: {REFERENCE_DISTRIBUTION} in {installed_env}"), output
    assert packages & HEAVY == set()


@pytest.mark.slow  # its own environment: a launch registers the experiment there
def test_launch_imports_only_what_it_runs(installed_env: Path, tmp_path: Path) -> None:
    """`launch` imports neither the other areas' operations (slurm, the report, the
    installer) nor the MCP SDK: every command paid ~130 ms for them before."""
    data = manifest_data(max_trials=1)
    data["execution"]["pass_env"] = []  # the engine is installed: no PYTHONPATH for its trials
    manifest = write_manifest(tmp_path / "one.yaml", data)
    args = ("launch", "--manifest", str(manifest), "--python", str(installed_env))
    code, output, modules = imported_by(*args, "--workspace", str(tmp_path / "ws"))
    assert code == 0 and output.startswith("launched exp on engine commit"), output
    assert modules & HEAVY == set()
    assert [m for m in modules if m.startswith(NOT_LAUNCH)] == []


def test_closed_tool_schemas_equal_the_ones_regenerated_from_the_strict_models() -> None:
    """The server closes each tool's published input schema in place instead of regenerating
    it (start-up time): it must be exactly what the strict argument model generates."""
    from mcp_server.faces.mcp.server import server

    server.register_now()
    tools = server._tool_manager.list_tools()
    assert tools
    for tool in tools:
        strict = tool.fn_metadata.arg_model
        assert strict.model_config.get("extra") == "forbid", tool.name
        assert tool.parameters == strict.model_json_schema(by_alias=True), tool.name
        assert json.dumps(tool.parameters).count('"additionalProperties": false') >= 1


def test_the_mcp_servers_start_imports_none_of_the_areas_behind_its_tools() -> None:
    """Until a call needs them, the server lists its tools from the committed catalog, so its
    start imports the SDK and the runtime, not the 21 tools' areas, results and renderers."""
    code = "import sys, mcp_server.faces.mcp.server; print(' '.join(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    ours = [m for m in proc.stdout.split() if m.startswith("mcp_server.")]
    assert "mcp_server.faces.mcp.app" in ours  # the server itself was imported
    areas = ("environment", "experiments", "slurm", "report", "source", "operations")
    late = [f"mcp_server.{area}" for area in areas] + ["mcp_server.faces.tools_"]
    assert [m for m in ours if m.startswith(tuple(late))] == [], ours
    assert [m for m in ours if m.startswith("mcp_server.faces.render")] == [], ours


def test_the_committed_mcp_catalog_is_what_the_registered_tools_publish() -> None:
    assert CATALOG_PATH.read_text(encoding="utf-8") == render(live_catalog()), (
        f"{CATALOG_PATH} is stale: run `python -m mcp_server.faces.mcp.catalog` and commit it"
    )


def test_wait_exit_returns_the_status_and_times_out_like_popen_wait() -> None:
    """wait_exit replaces Popen.wait(timeout=...) on the install's and launch's hot paths."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert wait_exit(proc, 60) == 3
    assert wait_exit(proc, 60) == 3  # reaped already: answered without a pidfd

    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=PIPE)
    with pytest.raises(subprocess.TimeoutExpired):
        wait_exit(proc, 0.2)
    assert proc.poll() is None  # still running: a timeout only reports, as Popen.wait does
    assert proc.stdin is not None
    proc.stdin.close()
    assert wait_exit(proc, None) == 0


def test_a_git_past_its_timeout_is_stopped_with_its_helpers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git runs as a plain process now: on a timeout it and a helper it started (as ssh
    would be) are killed, and the step fails saying so instead of hanging on the helper."""
    pids = tmp_path / "pids"
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    # The pids first, with builtins only; the timeout leaves a slow machine seconds for that.
    shim.write_text(f'#!/bin/sh\nsleep 60 &\necho $$ $! > "{pids}"\nwait\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(SetupError) as caught:
        run_git(["fetch"], step="fetch", timeout=3.0, watch=Watch())
    assert "git took longer than 3 s and was stopped" in caught.value.cause
    started = [int(pid) for pid in pids.read_text().split()]
    assert len(started) == 2, started  # git and its helper: else nothing below is checked
    for pid in started:
        assert not alive(pid), pid


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"
