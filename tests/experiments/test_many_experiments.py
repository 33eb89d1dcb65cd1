"""Many experiments: `list` and `status` through status snapshots and the engine's `status` of
several ids in one process, and the MCP listing's pages. Real engines, real CLI processes, the
real MCP SDK client in process; the experiments beside the real one are cloned in the real
formats by the benchmark's own generator (bench/experimentscale.py)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from support.cli import run_cli
from support.engines import install_main, new_source_repo
from support.experiments import ENGINE_CLI, Experiment, write_manifest
from support.mcp import call_ok, error_text
from support.trees import tree_digest

from bench.experimentscale import clone_experiments
from mcp_server.experiments import answers
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.snapshot import Snapshots
from mcp_server.faces.mcp.server import server
from mcp_server.faces.registry.experiments import MCP_PAGE_SIZE
from mcp_server.values import WorkspacePath

MANY = MCP_PAGE_SIZE + 23  # two pages through MCP


@dataclass(frozen=True)
class Workspace:
    env: Path
    path: Path
    ids: list[str]


def _launch(tmp: Path, env: Path, workspace: Path, experiment_id: str) -> Experiment:
    path = tmp / f"{experiment_id}.yaml"
    manifest = write_manifest(path, experiment_id=experiment_id, max_trials=2, sleep=0)
    exp = Experiment(manifest, workspace, env, experiment_id)
    result = exp.cli("launch")
    assert result.code == 0, result.output
    return exp


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """One environment; a workspace of MANY completed experiments (one launched, the others
    its clones)."""
    root = tmp_path_factory.mktemp("many")
    env = install_main(root / "env", new_source_repo(root / "repo"))
    workspace = (root / "ws").resolve()
    _launch(root, env, workspace, "exp")
    ids = clone_experiments(env, ExperimentFiles(workspace, "exp"), MANY)  # type: ignore[arg-type]
    return Workspace(env, workspace, sorted(ids))


def _json(*args: str) -> dict[str, Any]:
    result = run_cli(*args, "--json")
    assert result.code == 0, result.output
    return dict(json.loads(result.stdout))


def _status(workspace: Path, experiment_id: str) -> dict[str, Any]:
    return _json("status", "--experiment-id", experiment_id, "--workspace", str(workspace))


def _snapshots(workspace: Path) -> Snapshots:
    return Snapshots(WorkspacePath(str(workspace)).path)


def _forget_snapshots(workspace: Path) -> None:
    shutil.rmtree(_snapshots(workspace).dir, ignore_errors=True)


def _engine(env: Path, workspace: Path, *ids: str) -> dict[str, Any]:
    argv = [str(env / "bin" / ENGINE_CLI), "status", "--workspace", str(workspace), "--json"]
    argv += [a for i in ids for a in ("--experiment-id", i)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return dict(json.loads(proc.stdout))


def test_engine_status_of_many_ids_answers_each_as_alone(many: Workspace) -> None:
    asked = [many.ids[0], many.ids[-1], "no-such", many.ids[5]]
    together = _engine(many.env, many.path, *asked)["experiments"]
    alone = [_engine(many.env, many.path, one) for one in asked]
    assert [entry["experiment_id"] for entry in together] == asked
    assert together[2]["error"] == alone[2]["error"] and together[2]["exit_code"] == 1
    assert [together[n] for n in (0, 1, 3)] == [alone[n] for n in (0, 1, 3)]


def test_list_and_status_answer_as_without_snapshots(many: Workspace) -> None:
    _forget_snapshots(many.path)
    listed = _json("list", "--workspace", str(many.path))  # asked: batched, then kept
    assert _snapshots(many.path).found() == set(many.ids)
    again = _json("list", "--workspace", str(many.path))  # from the snapshots
    assert again == listed
    assert [e["experiment_id"] for e in listed["experiments"]] == many.ids
    assert listed["total"] == MANY and listed["next_cursor"] is None and not listed["unreadable"]
    by_id = {e["experiment_id"]: e for e in listed["experiments"]}
    for experiment_id in (many.ids[0], many.ids[len(many.ids) // 2]):
        kept = _status(many.path, experiment_id)
        _forget_snapshots(many.path)
        assert _status(many.path, experiment_id) == kept == by_id[experiment_id]
    assert all(e["state"] == "completed" and e["trials_done"] == 2 for e in by_id.values())


def _tamper_answer(workspace: Path, experiment_id: str, **changes: Any) -> None:
    """A snapshot whose key is current but whose answer says otherwise: shows whether the
    snapshot, not the engine, answered."""
    path = _snapshots(workspace).path(experiment_id)
    data = json.loads(path.read_bytes())
    data["snapshot"]["answer"].update(changes)
    path.write_text(json.dumps(data))


def test_snapshot_is_asked_again_when_the_ledger_changes(tmp_path: Path, many: Workspace) -> None:
    workspace = tmp_path / "ws"
    _launch(tmp_path, many.env, workspace, "one")
    first = _status(workspace, "one")
    _tamper_answer(workspace, "one", trials_done=777)
    assert _status(workspace, "one")["trials_done"] == 777  # the snapshot answered
    ledger = workspace / "one" / "ledger.jsonl"
    st = ledger.stat()
    os.utime(ledger, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # same bytes, rewritten
    assert _status(workspace, "one") == first  # the engine answered again
    _tamper_answer(workspace, "one", trials_done=777)
    ledger.write_bytes(ledger.read_bytes())  # the same bytes written again in place
    assert _status(workspace, "one") == first


def test_snapshot_is_asked_again_when_the_environment_changes(
    tmp_path: Path, many: Workspace
) -> None:
    workspace = tmp_path / "ws"
    _launch(tmp_path, many.env, workspace, "two")
    first = _status(workspace, "two")
    _tamper_answer(workspace, "two", trials_done=777)
    (site,) = many.env.glob("lib/python*/site-packages")
    marker = site / "a_new_distribution"
    marker.mkdir()  # what an install into the environment does to its site-packages
    try:
        assert _status(workspace, "two") == first
    finally:
        marker.rmdir()


def test_resumed_experiment_is_not_answered_from_its_interrupted_snapshot(
    interrupted: Experiment,
) -> None:
    assert interrupted.status()["state"] == "interrupted"  # asked, and kept
    assert _snapshots(interrupted.workspace).found() == {interrupted.experiment_id}
    assert interrupted.cli("resume").code == 0
    resumed = interrupted.status()
    assert resumed["state"] == "completed" and resumed["trials_done"] == 4


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "extra field", "another workspace", "link"],
)
def test_damaged_snapshot_is_ignored_and_asked_again(
    tmp_path: Path, many: Workspace, damage: str
) -> None:
    experiment_id = many.ids[3]
    _forget_snapshots(many.path)
    fresh = _status(many.path, experiment_id)
    path = _snapshots(many.path).path(experiment_id)
    data = json.loads(path.read_bytes())
    data["snapshot"]["answer"]["trials_done"] = 777
    elsewhere = tmp_path / "planted.json"
    if damage == "garbage":
        path.write_bytes(b"\x00not json")
    elif damage == "truncated":
        path.write_bytes(json.dumps(data).encode()[:-3])
    elif damage == "extra field":
        path.write_text(json.dumps({**data, "trusted": True}))
    elif damage == "another workspace":
        path.write_text(json.dumps({**data, "workspace": str(tmp_path)}))
    else:  # a link planted at the snapshot's name, to a snapshot that would answer 777
        elsewhere.write_text(json.dumps(data))
        path.unlink()
        path.symlink_to(elsewhere)
    planted = elsewhere.read_bytes() if damage == "link" else None
    assert _status(many.path, experiment_id) == fresh
    if damage == "link":  # never read nor written through the link
        assert path.is_symlink() and elsewhere.read_bytes() == planted
        path.unlink()
    else:  # replaced by a sound snapshot
        assert _snapshots(many.path).found() == {experiment_id}


async def _walk(client: Client, workspace: Path) -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        args: dict[str, Any] = {"workspace": str(workspace)}
        if cursor is not None:
            args["cursor"] = cursor
        listed = await call_ok(client, "list_experiments", args)
        pages.append(listed)
        cursor = listed["next_cursor"]
        if cursor is None:
            return pages


@pytest.mark.anyio
async def test_mcp_pages_walk_every_experiment_exactly_once(many: Workspace) -> None:
    async with Client(server) as client:
        pages = await _walk(client, many.path)
    assert [len(p["experiments"]) for p in pages] == [MCP_PAGE_SIZE, MANY - MCP_PAGE_SIZE]
    walked = [e["experiment_id"] for p in pages for e in p["experiments"]]
    assert walked == many.ids  # each once, in id order
    assert {p["total"] for p in pages} == {MANY}
    assert f"this page shows {MCP_PAGE_SIZE} of {MANY} experiments" in pages[0]["message"]
    assert pages[0]["next_cursor"] in pages[0]["message"]
    listed = _json("list", "--workspace", str(many.path))  # the command line shows them all
    assert [e for p in pages for e in p["experiments"]] == listed["experiments"]


def test_cli_pages_walk_every_experiment_exactly_once(many: Workspace) -> None:
    walked: list[str] = []
    cursor: list[str] = []
    while True:
        listed = _json("list", "--workspace", str(many.path), "--page-size", "50", *cursor)
        walked += [e["experiment_id"] for e in listed["experiments"]]
        if listed["next_cursor"] is None:
            break
        cursor = ["--cursor", listed["next_cursor"]]
    assert walked == many.ids


def _cursor(**fields: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")


@pytest.mark.anyio
async def test_bad_or_stale_cursor_is_refused_and_nothing_changes(
    tmp_path: Path, many: Workspace
) -> None:
    other = tmp_path / "other-ws"
    shutil.copytree(many.path / ".automl-setup" / many.ids[0], other / ".automl-setup" / "x")
    cache = Path(os.environ["AUTOML_SETUP_STATUS_CACHE"])
    async with Client(server) as client:
        first = await call_ok(client, "list_experiments", {"workspace": str(many.path)})
        stale = first["next_cursor"]  # of the other workspace
        before = tree_digest(many.path), tree_digest(other), tree_digest(cache)
        cases = {
            "!!": "is not a listing's cursor",
            "bm90IGpzb24": "is not a cursor a listing gave (it does not decode)",
            _cursor(v=1, workspace="x", after="a", more=1): "is not a cursor a listing gave",
            _cursor(v=2, workspace="x", after="a"): "is of format '2', not 1",
            stale: f"is stale: it was made for another workspace than {other}",
        }
        for cursor, why in cases.items():
            args = {"workspace": str(other), "cursor": cursor}
            refused = await client.call_tool("list_experiments", args)
            text = error_text(refused, "list_experiments")
            assert why in text, text
            assert "unchanged, or no" in text or "unchanged, or none" in text, text
    assert (tree_digest(many.path), tree_digest(other), tree_digest(cache)) == before
    result = run_cli("list", "--workspace", str(other), "--cursor", stale)
    assert result.code == 2 and "is stale" in result.stderr, result.output


@pytest.mark.parametrize("count", [2, 3, 5, 10, 401, 1000, 1001, 2001, 5000])
def test_engine_batches_keep_every_worker_busy_and_lose_no_id(count: int) -> None:
    """The ids of one engine go to its processes in order, every one exactly once, in batches
    of 2 to BATCH ids, a multiple of the workers' number of them when there are enough ids
    (1,000 ids were 5 batches of 200: the last ran alone in a third round)."""
    members = list(range(count))
    chunks = answers._chunks(members)
    assert [n for chunk in chunks for n in chunk] == members
    assert all(2 <= len(chunk) <= answers.BATCH for chunk in chunks)
    assert max(map(len, chunks)) - min(map(len, chunks)) <= 1
    if count >= 2 * answers.WORKERS:
        assert len(chunks) % answers.WORKERS == 0
