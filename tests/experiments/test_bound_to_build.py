"""Which experiments are bound to this build? `list --bound-commit / --identity-digest /
--closure-member` across workspaces, and the MCP tool with the same filters: exactly the
experiments bound to it, never one that cannot say left out silently."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from support.cli import profile_args, run_cli
from support.engines import install_main, new_source_repo
from support.experiments import write_manifest

from mcp_server.faces.mcp.server import server


@dataclass
class Bound:
    """Two builds (main, dev) in two environments; experiments in two workspaces."""

    ws1: Path
    ws2: Path
    main: str
    dev: str
    dev_digest: str


def launch(tmp_path: Path, env: Path, workspace: Path, experiment_id: str) -> None:
    manifest = write_manifest(tmp_path / f"{experiment_id}.yaml", experiment_id=experiment_id,
                              max_trials=1, sleep=0.0)  # fmt: skip
    done = run_cli("launch", "--manifest", str(manifest), "--workspace", str(workspace),
                   "--python", str(env))  # fmt: skip
    assert done.code == 0, done.output


def listed(*args: str) -> tuple[int, dict[str, Any]]:
    done = run_cli("list", *args, "--json")
    return done.code, json.loads(done.stdout)


@pytest.fixture(scope="module")
def bound(tmp_path_factory: pytest.TempPathFactory) -> Bound:
    root = tmp_path_factory.mktemp("bound")
    repo = new_source_repo(root / "repo")
    repo.commit_engine("dev-bound", marker="dev build", base="main")
    env_main = install_main(root / "env-main", repo)
    env_dev = root / "env-dev"
    done = run_cli("install", "--branch", "dev-bound", "--python", str(env_dev), "--create-env",
                   *profile_args(repo))  # fmt: skip
    assert done.code == 0, done.output
    ws1, ws2 = root / "ws1", root / "ws2"
    launch(root, env_main, ws1, "a1")
    launch(root, env_dev, ws1, "b1")
    launch(root, env_main, ws2, "a2")
    code, dev = listed("--workspace", str(ws1), "--bound-commit", repo.head("dev-bound"))
    assert code == 0
    return Bound(ws1, ws2, repo.head("main"), repo.head("dev-bound"),
                 dev["experiments"][0]["identity_digest"])  # fmt: skip


def ids(listing: dict[str, Any]) -> list[tuple[str, str]]:
    return [(Path(e["workspace"]).name, e["experiment_id"]) for e in listing["experiments"]]


@pytest.mark.slow
def test_the_bound_commit_query_finds_exactly_its_experiments_across_workspaces(
    bound: Bound,
) -> None:
    both = ["--workspace", str(bound.ws1), "--workspace", str(bound.ws2)]
    code, main = listed(*both, "--bound-commit", bound.main[:10])
    assert code == 0 and ids(main) == [("ws1", "a1"), ("ws2", "a2")], main
    assert main["workspaces"] == [str(bound.ws1), str(bound.ws2)]
    assert main["filters"] == {"bound_commit": bound.main[:10]} and main["total"] == 2
    assert all(e["bound_commit"] == bound.main for e in main["experiments"])

    code, dev = listed(*both, "--identity-digest", bound.dev_digest[:12])
    assert code == 0 and ids(dev) == [("ws1", "b1")], dev

    # Both builds share their dependencies: a member names all three, a version none.
    code, pydantic = listed(*both, "--closure-member", "Pydantic")
    assert code == 0 and len(pydantic["experiments"]) == 3, pydantic
    code, other = listed(*both, "--closure-member", "pydantic==0.0.1")
    assert code == 0 and other["experiments"] == [] and other["total"] == 0
    text = run_cli("list", *both, "--closure-member", "pydantic==0.0.1").stdout
    assert text.strip() == (
        f"no experiment bound to closure member pydantic==0.0.1 in {bound.ws1}, {bound.ws2}"
    )

    code, nothing = listed(*both, "--bound-commit", "0000000")
    assert code == 0 and nothing["experiments"] == [], nothing


@pytest.mark.slow
def test_an_experiment_whose_binding_cannot_say_is_named_not_left_out(
    bound: Bound, tmp_path: Path
) -> None:
    ws = tmp_path / "ws3"
    broken = ws / ".automl-setup" / "broken"
    broken.mkdir(parents=True)
    (broken / "binding.json").write_text("{not json")
    code, found = listed("--workspace", str(ws), "--workspace", str(bound.ws2),
                         "--bound-commit", bound.main)  # fmt: skip
    assert code == 1, found  # exit 1 whenever one is unreadable, as without a filter
    assert ids(found) == [("ws2", "a2")]
    (why,) = found["unreadable"]
    assert why.startswith("broken: ") and why.endswith("(so it may be bound to that build)")


@pytest.mark.slow
def test_the_mcp_tool_takes_the_same_filters(bound: Bound) -> None:
    async def ask() -> dict[str, Any]:
        async with Client(server) as client:
            args = {"workspace": str(bound.ws1), "bound_commit": bound.dev[:8]}
            result = await client.call_tool("list_experiments", args)
            assert not result.is_error, result.content
            assert result.structured_content is not None
            return result.structured_content

    listing = anyio.run(ask)
    assert [e["experiment_id"] for e in listing["experiments"]] == ["b1"]
    assert listing["filters"] == {"bound_commit": bound.dev[:8]}


def test_filters_refuse_what_is_not_a_prefix_or_a_name() -> None:
    for flag, value, step in (
        ("--bound-commit", "main", "validate prefix"),
        ("--identity-digest", "abc", "validate prefix"),
        ("--closure-member", "numpy>=2", "validate closure member"),
        ("--closure-member", "--upload-pack=x", "validate closure member"),
    ):
        done = run_cli("list", "--workspace", "/nonexistent-ws", f"{flag}={value}")
        assert done.code == 2, done.output
        assert done.stderr.startswith(f"error: {step}: "), done.stderr
