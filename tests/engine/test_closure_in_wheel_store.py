"""The closure in the wheel store: an install keeps the wheels of its VCS dependencies (packed
from the environment, at the commits they resolved to), `store keep` keeps the rest of an
experiment's bound closure, and `recreate` then succeeds with the repositories and the index
unreachable and an empty uv cache; without the rest it names what is missing and from where.
Real git repositories, uv, engine processes and the MCP client (support/closure.py's world)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client
from support import mcp as mcp_support
from support.cli import run_cli
from support.closure import DEPA, DEPB, IDX, World, install
from support.experiments import Experiment, Reaper, make_interrupted

from mcp_server.environment.wheelstore import STORE_ENV
from mcp_server.faces.mcp.server import server

pytestmark = pytest.mark.slow


async def mcp_keep(exp: Experiment) -> dict[str, object]:
    args = {"action": "keep", "experiment_id": "exp", "workspace": str(exp.workspace)}
    async with Client(server) as client:
        return await mcp_support.call_ok(client, "store_wheels", args)


def recreate(exp: Experiment, env: Path, offline: dict[str, str]) -> object:
    return run_cli(
        "recreate", "--experiment-id", "exp", "--workspace", str(exp.workspace),
        "--python", str(env), "--create-env", "--json", env=offline,
    )  # fmt: skip


def test_recreate_from_the_store_alone_with_the_index_and_repositories_unreachable(
    world: World,
    tmp_path: Path,
    reaper: Reaper,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "store"))  # its own: what this test kept
    env = tmp_path / "env"
    assert install(world, env, "main", "--create-env").code == 0  # type: ignore[attr-defined]
    listed = json.loads(run_cli("store", "list", "--json").stdout)["entries"]
    kept = {e["distribution"]: e for e in listed if e["member_of"] == str(env)}
    assert set(kept) == {DEPA, DEPB}  # the VCS dependencies, at their commits
    assert kept[DEPB]["origin"] == "closure-member"
    assert kept[DEPB]["commit"] == world.depb.head()
    exp = make_interrupted(tmp_path, env, reaper)
    bound = json.loads(exp.binding.read_text())["engine"]["closure"]

    # Nothing reachable: the repositories moved away, an index that refuses connections, no
    # find-links, an empty uv cache.
    for repo in (world.depa, world.depb):
        repo.bare.rename(repo.bare.with_name(f"{repo.bare.name}-gone"))
    empty = tmp_path / "empty-links"
    empty.mkdir()
    offline = {
        "UV_INDEX_URL": "http://127.0.0.1:9/simple",
        "UV_FIND_LINKS": str(empty),
        "UV_CACHE_DIR": str(tmp_path / "empty-cache"),
    }
    refused = recreate(exp, tmp_path / "first", offline)
    assert refused.code == 1, refused.output  # type: ignore[attr-defined]
    error = json.loads(refused.stdout)["error"]  # type: ignore[attr-defined]
    assert error["step"] == "recreate" and "are not in the wheel store" in error["cause"]
    assert f"{IDX} 1.0 from the package index" in error["details"]
    assert not any(d.startswith((f"{DEPA} ", f"{DEPB} ")) for d in error["details"])  # stored
    assert "automl-setup store keep --experiment-id exp" in error["remedy"]

    # The rest of the bound closure kept (the MCP face), then recreate needs nothing else.
    told = anyio.run(mcp_keep, exp)
    entries: list[dict[str, str]] = told["entries"]  # type: ignore[assignment]
    added = {e["distribution"] for e in entries if e["state"] == "added"}
    assert added == set(bound) - {DEPA, DEPB}
    new_env = tmp_path / "recreated"
    result = recreate(exp, new_env, offline)
    assert result.code == 0, result.output  # type: ignore[attr-defined]
    done = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert sorted(done["members_from_store"]) == sorted(bound)
    assert done["members_from_elsewhere"] == []
    record = json.loads((new_env / ".automl-setup" / "engine-record.json").read_text())
    assert record["closure"] == bound  # the bound origins written back: the same closure
    resumed = Experiment(exp.manifest, exp.workspace, new_env).cli("resume")
    assert resumed.code == 0, resumed.output
