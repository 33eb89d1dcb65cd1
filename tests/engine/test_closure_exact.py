"""The whole closure, exactly: an engine requiring `depa @ git+file://…` (no commit), which
requires `depb @ git+file://…` and a versioned package from a local find-links folder. Real
git repositories, real uv installs and resolution, real engine processes: the record names
both commits and flags the moving references, `--require-pinned` refuses with nothing changed,
an unrelated package is accepted and a moved or upgraded member of the closure is refused by
resume (both faces' words) and verify, and recreate installs the bound commits again."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client
from support import mcp as mcp_support
from support.cli import profile_args, run_cli
from support.closure import DEPA, DEPB, HISTORY, IDX, World, install, uv_pip
from support.engines import make_venv, site_packages
from support.experiments import Experiment, Reaper, make_interrupted, write_manifest
from support.trees import env_snapshot

from mcp_server.children.uv import uv_binary
from mcp_server.environment.probe import probe_interpreter
from mcp_server.faces.mcp.server import server
from mcp_server.source.profile import tomllib

pytestmark = pytest.mark.slow


async def mcp_resume(exp: Experiment) -> str:
    args = {
        "experiment_id": "exp",
        "workspace": str(exp.workspace),
        "manifest": str(exp.manifest),
        "python": str(exp.env),
    }
    async with Client(server) as client:
        return mcp_support.error_text(
            await client.call_tool("resume_experiment", args), "resume_experiment"
        )


def test_a_lock_of_the_bound_closure_syncs_into_a_new_environment(
    world: World, tmp_path: Path
) -> None:
    env = tmp_path / "env"
    assert install(world, env, "main", "--create-env").code == 0  # type: ignore[attr-defined]
    manifest = write_manifest(tmp_path / "m.yaml", max_trials=1, sleep=0.0)
    exp = Experiment(manifest, tmp_path / "ws", env)
    assert exp.cli("launch").code == 0
    out = tmp_path / "pylock.toml"
    locked = run_cli(
        "lock", "--experiment-id", "exp", "--workspace", str(exp.workspace), "--out", str(out),
        "--json",
    )  # fmt: skip
    assert locked.code == 0, locked.output
    result = json.loads(locked.stdout)
    lock = tomllib.loads(out.read_text())
    assert lock["lock-version"] == "1.0"
    packages = {p["name"]: p for p in lock["packages"]}
    bound = json.loads(exp.binding.read_text())["engine"]
    assert packages[DEPB]["vcs"]["commit-id"] == world.depb.head()
    wheel = packages["automl-refengine"]
    sources = [*wheel.get("wheels", []), wheel.get("archive") or {}]
    assert bound["build"]["wheel_sha256"] in [s.get("hashes", {}).get("sha256") for s in sources]
    assert result["vcs"] == [f"{DEPA}@{world.depa.head()}", f"{DEPB}@{world.depb.head()}"]
    # Never overwritten: the same bytes again are fine, other bytes refused.
    again = run_cli("lock", "--experiment-id", "exp", "--workspace", str(exp.workspace),
                    "--out", str(out), "--json")  # fmt: skip
    assert again.code == 0 and json.loads(again.stdout)["written"] is False

    other = tmp_path / "locks.toml"
    named = run_cli("lock", "--experiment-id", "exp", "--workspace", str(exp.workspace),
                    "--out", str(other))  # fmt: skip
    assert named.code == 2 and "not a PEP 751 lock file name" in named.stderr
    assert not other.exists()
    world.depb.commit("moved")  # a moving branch moved: the lock still says the bound commit
    fresh = make_venv(tmp_path / "fresh")
    sync = [uv_binary(), "pip", "sync", "--quiet", "--python", str(fresh / "bin" / "python")]
    subprocess.run([*sync, str(out)], check=True, capture_output=True)
    found = probe_interpreter(fresh / "bin" / "python", ["automl-refengine"]).closure(
        "automl-refengine", []
    )
    assert {n: m.version for n, m in found.items()} == {
        n: m["version"] for n, m in bound["closure"].items()
    }
    assert found[DEPB].direct_url is not None
    assert found[DEPB].direct_url.commit_id == world.depb.head(1)


def test_the_record_names_both_commits_and_the_moving_references(
    world: World, tmp_path: Path
) -> None:
    env = tmp_path / "env"
    result = install(world, env, "main", "--create-env")
    assert result.code == 0, result.output  # type: ignore[attr-defined]
    record = json.loads((env / ".automl-setup" / "engine-record.json").read_text())
    closure = record["closure"]
    assert record["schema_version"] == 3
    assert closure[DEPA]["direct_url"]["commit_id"] == world.depa.head()
    assert closure[DEPB]["direct_url"]["commit_id"] == world.depb.head()
    assert closure[DEPA]["moving"] and closure[DEPB]["moving"]
    assert closure[IDX]["version"] == "1.0" and closure[IDX]["direct_url"] is None
    assert {"pydantic", "pyyaml"} <= set(closure)  # the reference engine's own
    # The output names each VCS dependency by the commit it resolved to, flagged.
    origin = f"git+{world.depb.bare.as_uri()} (no revision) -> commit {world.depb.head()}"
    shown = result.stdout  # type: ignore[attr-defined]
    assert f"depends:  {DEPB} 1.0 from {origin}  [resolved from a moving reference]" in shown
    # --json carries the same closure (the same build again: verified, unchanged).
    again = install(world, env, "main", "--json")
    assert json.loads(again.stdout)["record"]["closure"] == closure  # type: ignore[attr-defined]
    text = run_cli("verify", "--python", str(env), *profile_args(world.engine))
    assert text.code == 0, text.output


def test_require_pinned_refuses_a_moving_reference_changing_nothing(
    world: World, tmp_path: Path
) -> None:
    env = make_venv(tmp_path / "env")
    before = env_snapshot(env)
    direct = install(world, env, "main", "--require-pinned", "--json")
    assert direct.code == 1  # type: ignore[attr-defined]
    error = json.loads(direct.stdout)["error"]  # type: ignore[attr-defined]
    assert error["step"] == "check pins" and "nothing was changed" in error["cause"]
    assert error["details"] == [f"{DEPA} @ {world.depa.url}"]
    assert env_snapshot(env) == before
    # The engine pins depa; depa's own depb names no commit: found after uv resolved it, and
    # the install rolled back.
    deeper = install(world, env, "dev/pinned", "--require-pinned")
    assert deeper.code == 1, deeper.output  # type: ignore[attr-defined]
    said = deeper.stderr  # type: ignore[attr-defined]
    assert "of the dependency closure resolve from a moving reference" in said
    assert f"{DEPB}: git+{world.depb.bare.as_uri()} (no revision) -> commit" in said
    # Rolled back: the same packages and no record; the history says so, uv left its lock.
    kept = {k: v for k, v in env_snapshot(env).items() if k not in (HISTORY, ".lock")}
    assert kept == before
    history = (env / HISTORY).read_text().splitlines()
    assert [json.loads(line)["event"] for line in history] == ["rolled-back"]


def test_resume_accepts_an_unrelated_package_and_refuses_a_moved_member(
    world: World, tmp_path: Path, reaper: Reaper
) -> None:
    env = tmp_path / "env"
    assert install(world, env, "main", "--create-env").code == 0  # type: ignore[attr-defined]
    exp: Experiment = make_interrupted(tmp_path, env, reaper)
    world.add_index_version("1.1")  # available now, not installed: nothing changed
    uv_pip(env, "six")  # unrelated to the engine's closure
    with_unrelated = exp.cli("resume")
    assert with_unrelated.code == 0, with_unrelated.output
    assert exp.status()["state"] == "completed"


def test_a_moved_dependency_is_refused_and_recreate_restores_the_bound_commits(
    world: World, tmp_path: Path, reaper: Reaper
) -> None:
    env = tmp_path / "env"
    assert install(world, env, "main", "--create-env").code == 0  # type: ignore[attr-defined]
    bound_b = world.depb.head()
    exp = make_interrupted(tmp_path, env, reaper)
    moved = world.depb.commit("2")
    uv_pip(env, "--reinstall-package", DEPB, f"{DEPB} @ {world.depb.url}")
    refused = exp.cli("resume", "--json")
    assert refused.code == 1
    error = json.loads(refused.stdout)["error"]
    diff = f"closure.{DEPB}.direct_url.commit_id: recorded {bound_b}, found {moved}"
    assert diff in error["details"]
    verify = run_cli(
        "verify", "--python", str(env), "--experiment-id", "exp",
        "--workspace", str(exp.workspace), *profile_args(world.engine),
    )  # fmt: skip
    assert verify.code == 1 and f"closure.{DEPB}.direct_url.commit_id" in verify.stdout
    # The MCP face says the same; so does the SLURM gate on an allocation (exit 78).
    told = anyio.run(mcp_resume, exp)
    assert diff in told
    gate = run_cli(
        "slurm", "gate", "--experiment-id", "exp", "--workspace", str(exp.workspace),
        "--python", str(env), "--generation", "1", "--cap", "3", "--action", "resume",
    )  # fmt: skip
    assert gate.code == 78 and diff in gate.output
    # A file of a member edited in place: verify --deep names it.
    (site_packages(env) / "automl_fixture_depb" / "__init__.py").write_text("MARKER = 'x'\n")
    deep = run_cli("verify", "--python", str(env), "--deep", *profile_args(world.engine))
    assert f"closure.{DEPB}.file automl_fixture_depb/__init__.py: recorded " in deep.stdout
    uv_pip(env, "--reinstall-package", DEPB, f"{DEPB} @ {world.depb.url}@{moved}")

    # The index package upgraded: refused, naming it.
    world.add_index_version("1.1")
    uv_pip(env, f"{IDX}==1.1")
    again = exp.cli("resume")
    assert again.code == 1 and f"closure.{IDX}.version: recorded 1.0, found 1.1" in again.stderr

    # recreate after both branches moved: the bound commits, and the resume is accepted there.
    world.depa.commit("2")
    new_env = tmp_path / "recreated"
    recreated = run_cli(
        "recreate", "--experiment-id", "exp", "--workspace", str(exp.workspace),
        "--python", str(new_env), "--create-env",
    )  # fmt: skip
    assert recreated.code == 0, recreated.output
    record = json.loads((new_env / ".automl-setup" / "engine-record.json").read_text())
    assert record["closure"][DEPB]["direct_url"]["commit_id"] == bound_b
    assert record["closure"][IDX]["version"] == "1.0"
    resumed = Experiment(exp.manifest, exp.workspace, new_env).cli("resume")
    assert resumed.code == 0, resumed.output
