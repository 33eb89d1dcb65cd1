"""Planted links in real state, through both faces: the install history, the next attempt's
log (its name is predictable), the attempts ledger, the binding, the controller lock, the
environment's registry entry, the install record, a report and the SLURM watcher's registry,
each replaced by a link to a victim outside that holds a valid file of that kind. Every
command that would write or read it is refused naming the link, the victim stays
byte-identical, the engine stays installed. Real installs, engine processes and the MCP SDK
client."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest
from mcp import Client
from support import mcp as mcp_support
from support.cli import profile_args, run_cli
from support.engines import make_venv
from support.experiments import Reaper, make_interrupted
from support.trees import env_snapshot

from mcp_server.environment.wheelstore import STORE_ENV
from mcp_server.faces.mcp.server import server
from mcp_server.slurm.jobregistry import JobRegistry
from mcp_server.source.sourcerepo import SourceRepository

pytestmark = pytest.mark.slow


def replace_by_link(path: Path, outside: Path) -> Path:
    """`path` moved to a victim outside (same valid content), a link left in its place."""
    outside.mkdir(exist_ok=True)
    victim = outside / f"victim-{path.name}"
    shutil.copyfile(path, victim) if path.exists() else victim.write_bytes(b"valid\n")
    path.unlink(missing_ok=True)
    path.symlink_to(victim)
    return victim


async def mcp_call(tool: str, args: dict[str, object]) -> str:
    async with Client(server) as client:
        return mcp_support.error_text(await client.call_tool(tool, args), tool)


def test_planted_links_are_refused_by_both_faces_and_change_nothing(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path, reaper: Reaper
) -> None:
    outside = tmp_path / "outside"
    env = installed_env
    history = env / ".automl-setup" / "history.jsonl"
    victim = replace_by_link(history, outside)
    before = victim.read_bytes()
    other = run_cli(
        "install", "--branch", "dev/next", "--python", str(env), *profile_args(source_repo)
    )
    assert other.code == 1 and f"{history} is a symbolic link (to {victim})" in other.stderr
    assert victim.read_bytes() == before
    history.unlink()
    history.write_bytes(before)  # put back: the experiment below needs a sound environment
    assert run_cli("verify", "--python", str(env), *profile_args(source_repo)).code == 0

    exp = make_interrupted(tmp_path, env, reaper)
    folder = exp.workspace / ".automl-setup" / exp.experiment_id
    # The next attempts' logs, by their predictable names: the engine's output goes nowhere.
    logs = [replace_by_link(folder / f"attempt-{n}.log", outside) for n in range(2, 6)]
    resumed = exp.cli("resume")
    assert resumed.code == 1 and "is a symbolic link (to" in resumed.stderr
    args = {
        "experiment_id": exp.experiment_id,
        "workspace": str(exp.workspace),
        "manifest": str(exp.manifest),
        "python": str(env),
    }
    assert "is a symbolic link (to" in anyio.run(mcp_call, "resume_experiment", args)
    assert all(log.read_bytes() == b"valid\n" for log in logs)
    for n in range(2, 6):
        (folder / f"attempt-{n}.log").unlink()

    registered = next((env / ".automl-setup" / "experiments").glob("exp--*.json"))
    state = [folder / "attempts.jsonl", folder / "binding.json", folder / "controller.lock"]
    state.append(registered)
    for planted in [*state, env / ".automl-setup" / "engine-record.json"]:
        victim = replace_by_link(planted, outside)
        before = victim.read_bytes()
        refused = exp.cli("resume")
        assert refused.code == 1 and f"{planted} is a symbolic link (to {victim})" in (
            refused.stderr
        )
        told = anyio.run(mcp_call, "resume_experiment", args)
        assert f"{planted} is a symbolic link" in told
        assert victim.read_bytes() == before
        planted.unlink()
        planted.write_bytes(before)
    assert exp.cli("resume").code == 0  # links gone, the experiment resumes and completes

    # A report's --out is the user's own path (resolved at the edge, like any input): a link
    # there names the file it points to, which exists, so nothing is written through it.
    out = tmp_path / "report.html"
    victim = replace_by_link(out, outside)
    report = ["report", "--experiment-id", "exp", "--workspace", str(exp.workspace)]
    refused = run_cli(*report, "--out", str(out))
    assert refused.code == 1 and f"{victim} already exists and is not this report" in (
        refused.stderr
    )
    query = {"experiment_id": "exp", "workspace": str(exp.workspace), "out": str(out)}
    assert "already exists" in anyio.run(mcp_call, "report_experiment", query)
    assert victim.read_bytes() == b"valid\n"
    # Its default place is state: the experiment's folder, where a link is refused.
    default = run_cli(*report)
    assert default.code == 0, default.output
    page = next(folder.glob("report-*.html"))
    content = page.read_bytes()
    victim = replace_by_link(page, outside)
    again = run_cli(*report)
    assert again.code == 1 and f"{page} is a symbolic link (to {victim})" in again.stderr
    assert victim.read_bytes() == content

    # The SLURM watcher's registry, which every tick reads under its lock (its receipts
    # ledger is a numbered append: test_planted_links.py).
    planted = exp.workspace / ".automl-setup" / "slurm-jobs.json"
    planted.write_text(JobRegistry().model_dump_json(indent=2) + "\n")
    victim = replace_by_link(planted, outside)
    before = victim.read_bytes()
    ticked = run_cli("slurm", "watch", "--workspace", str(exp.workspace), "--once")
    assert ticked.code != 0 and f"{planted} is a symbolic link" in ticked.output
    told = anyio.run(mcp_call, "watch_slurm", {"workspace": str(exp.workspace)})
    assert f"{planted} is a symbolic link" in told
    assert victim.read_bytes() == before


def test_a_linked_wheel_store_folder_is_refused_by_both_faces(
    tmp_path: Path, source_repo: SourceRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    elsewhere = tmp_path / "outside"
    elsewhere.mkdir()
    (store / "wheels").symlink_to(elsewhere)  # its entries would land outside the store
    monkeypatch.setenv(STORE_ENV, str(store))
    env = make_venv(tmp_path / "env")
    before = env_snapshot(env)
    cli = run_cli("install", "--branch", "main", "--python", str(env), *profile_args(source_repo))
    assert cli.code == 1 and f"{store / 'wheels'} is a symbolic link (to {elsewhere})" in (
        cli.stderr
    )
    args = {"branch": "main", "python": str(env), "profile": mcp_support.engine_args(source_repo)}
    assert f"{store / 'wheels'} is a symbolic link" in anyio.run(mcp_call, "install_engine", args)
    assert list(elsewhere.iterdir()) == [] and env_snapshot(env) == before
