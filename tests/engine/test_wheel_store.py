"""The content-addressed wheel store, reviewed-wheel installs and `recreate`, end to end: real
git repositories, real uv installs, real engine processes. One module-scoped world (a
repository, an environment with `main`, an interrupted experiment bound to it, its own store);
the tests run in file order and the last ones take the repository away."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import CliResult, run_cli
from support.engines import engine_marker, install_main, new_source_repo
from support.experiments import EXP, Experiment, make_interrupted, subreaper
from support.trees import env_snapshot, tree_digest

from mcp_server.environment.wheelstore import STORE_ENV, WheelStore
from mcp_server.source.sourcerepo import SourceRepository
from mcp_server.source.wheelbuild import sha256_file

pytestmark = pytest.mark.slow


@dataclass
class World:
    root: Path
    repo: SourceRepository
    env: Path
    exp: Experiment
    store: Path

    def cli(self, *args: str, store: Path | None = None) -> CliResult:
        return run_cli(*args, env={**os.environ, STORE_ENV: str(store or self.store)})

    def bound_sha(self) -> str:
        return str(json.loads(self.exp.binding.read_bytes())["engine"]["build"]["wheel_sha256"])

    def stored_wheel(self) -> Path:
        (wheel,) = (self.store / "wheels" / self.bound_sha()).glob("*.whl")
        return wheel


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("wheelstore")
    store = root / "store"
    previous = os.environ[STORE_ENV]
    os.environ[STORE_ENV] = str(store)  # this module's own store: it empties and alters it
    try:
        repo = new_source_repo(root / "repo")
        env = install_main(root / "env", repo)
        for reaper in subreaper():
            exp = make_interrupted(root, env, reaper)
            yield World(root, repo, env, exp, store)
    finally:
        os.environ[STORE_ENV] = previous


def rewritten(wheel: Path, out: Path, old: str, new: str) -> Path:
    """A copy of the wheel whose METADATA says `new` where it said `old` (a real, valid zip)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".dist-info/METADATA"):
                data = data.replace(old.encode(), new.encode())
            dst.writestr(info, data)
    return out


def copy_store(world: World, name: str) -> Path:
    target = world.root / name
    shutil.copytree(world.store, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def test_every_install_keeps_its_wheel_in_the_store(world: World) -> None:
    result = world.cli("store", "list", "--json")
    assert result.code == 0, result.output
    (entry,) = json.loads(result.stdout)["entries"]
    assert entry["sha256"] == world.bound_sha() and entry["origin"] == "source-build"
    assert entry["commit"] == world.repo.head("main")
    wheel = world.stored_wheel()
    assert sha256_file(wheel) == world.bound_sha()
    assert not os.access(wheel, os.W_OK) or os.geteuid() == 0  # read-only after the write
    assert world.cli("store", "verify").code == 0


def test_reviewed_wheel_refusals_change_nothing(world: World) -> None:
    wheel, sha = world.stored_wheel(), world.bound_sha()
    other = rewritten(wheel, world.root / "w1" / wheel.name, "Name: automl-refengine", "Name: x")
    newer = rewritten(wheel, world.root / "w2" / wheel.name, "Version: 0.1.0", "Version: 9.9")
    before = env_snapshot(world.env), tree_digest(world.store)
    cases = [
        (wheel, "f" * 64, f"hashes to sha256 {sha}, not the reviewed {'f' * 64}"),
        (other, sha256_file(other), "builds distribution 'x', not 'automl-refengine'"),
        (newer, sha256_file(newer), "automl-refengine 9.9 does not satisfy the requirement"),
    ]
    for path, given, said in cases:
        args = ["--wheel", str(path), "--sha256", given, "--requirement", "==0.1.0"]
        result = world.cli("install", *args, "--distribution", "automl-refengine",
                           "--python", str(world.env))  # fmt: skip
        assert result.code == 1, result.output
        assert said in result.stderr and "nothing was installed" in result.stderr
        assert (env_snapshot(world.env), tree_digest(world.store)) == before, said
    assert engine_marker(world.env) == "main-1"


def test_reviewed_wheel_installs_exactly_with_its_origin(world: World) -> None:
    target = world.root / "env-reviewed"
    args = ["--wheel", str(world.stored_wheel()), "--sha256", world.bound_sha()]
    result = world.cli("install", *args, "--distribution", "automl-refengine",
                       "--python", str(target), "--create-env", "--json")  # fmt: skip
    assert result.code == 0, result.output
    record = json.loads((target / ".automl-setup" / "engine-record.json").read_text())
    assert record["origin"] == "reviewed-wheel" and record["source"] is None
    assert record["schema_version"] == 3 and record["build"]["backend"] is None
    assert record["build"]["wheel_sha256"] == world.bound_sha()
    assert (
        world.cli("verify", "--python", str(target), "--distribution", "automl-refengine").code == 0
    )
    assert engine_marker(target) == "main-1"
    # The history of a reviewed wheel (no commit) names the wheel; it once crashed slicing None.
    history = world.cli("history", "--python", str(target))
    assert history.code == 0, history.output
    assert f"reviewed wheel {world.bound_sha()[:12]}" in history.stdout, history.stdout


STORE_ONCE = """
import sys, time
from pathlib import Path
from mcp_server.environment.artifact import read_wheel, store_wheel
start = float(sys.argv[3])
while time.time() < start:
    pass
print(store_wheel(read_wheel(Path(sys.argv[1]), sys.argv[2]), None, None).wheel)
"""


def test_two_processes_storing_the_same_wheel_at_once(world: World) -> None:
    wheel, sha = world.stored_wheel(), world.bound_sha()
    for round_ in range(3):
        store = world.root / f"race-{round_}"
        env = {**os.environ, STORE_ENV: str(store)}
        start = str(time.time() + 1.0)  # both processes store at the same instant
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", STORE_ONCE, str(wheel), sha, start],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=60) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert {out.strip() for out, _ in outs} == {str(store / "wheels" / sha / wheel.name)}
        assert WheelStore(store).digests() == [sha]
        assert sorted(p.name for p in (store / "wheels").iterdir()) == [sha]  # no leftovers
        assert WheelStore(store).check(sha).entry.origin == "reviewed-wheel"


def test_an_altered_store_entry_is_refused_by_verify_and_by_recreate(world: World) -> None:
    store = copy_store(world, "store-altered")
    wheel = store / "wheels" / world.bound_sha() / world.stored_wheel().name
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))
    before = tree_digest(store), tree_digest(world.exp.workspace)

    checked = world.cli("store", "verify", store=store)
    assert checked.code == 1, checked.output
    assert "damaged" in checked.stdout and "was altered" in checked.stdout

    target = world.root / "env-from-altered"
    result = world.cli("recreate", "--experiment-id", EXP, "--workspace", str(world.exp.workspace),
                       "--python", str(target), "--create-env", store=store)  # fmt: skip
    assert result.code == 1, result.output
    assert f"the wheel {wheel} in the store was altered" in result.stderr
    assert not target.exists()
    assert (tree_digest(store), tree_digest(world.exp.workspace)) == before


def test_gc_keeps_the_bound_wheels_and_removes_the_rest(world: World) -> None:
    store = copy_store(world, "store-gc")
    unbound = rewritten(world.stored_wheel(), world.root / "w3" / "x.whl", "0.1.0", "0.1.0+x")
    extra = WheelStore(store).put(
        unbound,
        WheelStore(store)
        .check(world.bound_sha())
        .entry.model_copy(update={"sha256": sha256_file(unbound), "wheel_filename": "x.whl"}),
    )
    refused = world.cli("store", "gc", store=store)
    assert refused.code == 2 and "--keep-bound" in refused.stderr
    result = world.cli("store", "gc", "--keep-bound", str(world.exp.workspace), store=store)
    assert result.code == 0, result.output
    assert WheelStore(store).digests() == [world.bound_sha()]
    assert not extra.path.exists() and "kept" in result.stdout


def test_recreate_refused_when_the_commit_is_gone_and_the_store_is_empty(world: World) -> None:
    bound = world.repo.head("main")
    world.repo.commit_engine("rewrite", marker="rewritten")  # an unrelated history
    world.repo.reset_branch("main", world.repo.head("rewrite"))
    world.repo.delete_branch("dev/next")
    world.repo.gc_prune()
    empty = world.root / "store-empty"
    target = world.root / "env-nowhere"
    before = tree_digest(world.exp.workspace)
    result = world.cli("recreate", "--experiment-id", EXP, "--workspace", str(world.exp.workspace),
                       "--python", str(target), "--create-env", store=empty)  # fmt: skip
    assert result.code == 1, result.output
    assert f"the bound wheel sha256 {world.bound_sha()} is not in the wheel store" in result.stderr
    assert f"the bound commit {bound} cannot be fetched" in result.stderr
    assert not target.exists() and not empty.exists()
    assert tree_digest(world.exp.workspace) == before


def test_recreate_from_the_store_alone_then_resume_is_accepted(world: World) -> None:
    shutil.rmtree(world.repo.root)  # no repository at all: only the store has the engine
    target = world.root / "env-recreated"
    result = world.cli("recreate", "--experiment-id", EXP, "--workspace", str(world.exp.workspace),
                       "--python", str(target), "--create-env")  # fmt: skip
    assert result.code == 0, result.output
    assert "wheel from the store" in result.stdout
    assert engine_marker(target) == "main-1"
    resumed = world.cli("resume", "--experiment-id", EXP, "--workspace", str(world.exp.workspace),
                        "--manifest", str(world.exp.manifest), "--python", str(target))  # fmt: skip
    assert resumed.code == 0, resumed.output
    assert world.exp.status()["state"] == "completed"
