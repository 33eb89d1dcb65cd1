"""The engine's own files against uv's cache: dependencies are linked from the cache (no copy
of the whole closure), the engine's files are copies of their own; an edit in place of either
is found, and each remedy restores the environment and the cache.

Every test here has its own uv cache (a linked file edited in place edits the cache too: the
user's must never see that), with the dependency served from a local find-links folder."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import CliResult, profile_args, run_cli
from support.closure import IDX, package
from support.engines import site_packages
from support.trees import tree_digest

from mcp_server.children.uv import uv_binary
from mcp_server.source.sourcerepo import REFERENCE_IMPORT, SourceRepository

pytestmark = pytest.mark.slow
DEP_FILE = "automl_fixture_idx/__init__.py"


@dataclass(frozen=True)
class Linked:
    """An engine requiring a find-links package, a private uv cache, and the env for both."""

    repo: SourceRepository
    cache: Path
    links: Path

    def env(self) -> dict[str, str]:
        return {"UV_CACHE_DIR": str(self.cache), "UV_FIND_LINKS": str(self.links)}

    def cli(self, *args: str) -> CliResult:
        return run_cli(*args, env=self.env())

    def install(self, env: Path, *args: str) -> CliResult:
        return self.cli("install", "--python", str(env), *args, *profile_args(self.repo))

    def cached_with(self, content: bytes) -> list[Path]:
        """The cache's files holding exactly `content`."""
        return [p for p in self.cache.rglob("*.py") if p.is_file() and p.read_bytes() == content]


@pytest.fixture
def linked(tmp_path: Path) -> Iterator[Linked]:
    links = tmp_path / "find-links"
    links.mkdir()
    project = package(tmp_path / "idx", IDX, "1.0", [], "1.0")
    build = [uv_binary(), "build", "--wheel", "--quiet", "--out-dir", str(links), str(project)]
    subprocess.run(build, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    repo = SourceRepository(tmp_path / "engine")
    repo.commit_engine("main", marker="linked", dependencies=[f"{IDX}>=1.0"])
    yield Linked(repo, tmp_path / "uv-cache", links)


def engine_files(env: Path) -> list[Path]:
    (dist_info,) = site_packages(env).glob("automl_refengine-*.dist-info")
    rows = (dist_info / "RECORD").read_text().splitlines()
    paths = (os.path.normpath(site_packages(env) / row.split(",")[0]) for row in rows)
    return [Path(p) for p in paths if Path(p).is_file()]


def test_engine_files_are_their_own_and_a_reinstall_restores_an_edit(
    linked: Linked, tmp_path: Path
) -> None:
    env = tmp_path / "env"
    installed = linked.install(env, "--branch", "main", "--create-env")
    assert installed.code == 0, installed.output
    # The dependency shares its bytes with the cache (no copy of the closure); no engine file
    # does, so an edit in place cannot reach the cache.
    assert (site_packages(env) / DEP_FILE).stat().st_nlink >= 2
    assert [p for p in engine_files(env) if p.stat().st_nlink != 1] == []
    edited = site_packages(env) / REFERENCE_IMPORT / "search.py"
    original = edited.read_bytes()
    cache = tree_digest(linked.cache)
    with edited.open("r+b") as handle:  # in place: same inode
        handle.write(b"# edited in place\n")
    assert tree_digest(linked.cache) == cache, "the edit reached uv's cache"

    verify = linked.cli("verify", "--python", str(env))
    assert verify.code == 1, verify.output
    assert f"differs: file {REFERENCE_IMPORT}/search.py: recorded " in verify.stdout
    commit = json.loads(linked.cli("verify", "--python", str(env), "--json").stdout)["commit"]
    remedy = f"remedy: reinstall the recorded build over it: automl-setup install --commit {commit}"
    assert remedy in verify.stdout
    # The remedy as given: the recorded bytes come back (from the cache, unedited).
    again = linked.install(env, "--commit", commit)
    assert again.code == 0, again.output
    repaired = "repaired: 1 modified file of the same build reinstalled (file "
    assert f"{repaired}{REFERENCE_IMPORT}/search.py)" in again.stdout
    assert edited.read_bytes() == original
    assert [p for p in engine_files(env) if p.stat().st_nlink != 1] == []
    clean = linked.cli("verify", "--python", str(env), "--deep")
    assert clean.code == 0, clean.output


def test_a_linked_dependency_file_edited_in_place_is_found_and_its_remedy_restores_both(
    linked: Linked, tmp_path: Path
) -> None:
    env = tmp_path / "env"
    assert linked.install(env, "--branch", "main", "--create-env").code == 0
    dep = site_packages(env) / DEP_FILE
    original = dep.read_bytes()
    edit = original + b"EDITED = True\n"
    dep.write_bytes(edit)  # in place, through the link: the cache entry holds it too
    assert linked.cached_with(edit), "the file was not linked from uv's cache"

    deep = linked.cli("verify", "--python", str(env), "--deep")
    assert deep.code == 1, deep.output
    assert f"differs: closure.{IDX}.file {DEP_FILE}: recorded " in deep.stdout
    report = json.loads(linked.cli("verify", "--python", str(env), "--deep", "--json").stdout)
    commands = report["restore_commands"]
    uv, interpreter = shlex.quote(uv_binary()), shlex.quote(str(env / "bin" / "python"))
    assert commands == [
        f"{uv} cache clean {IDX}",
        f"{uv} pip install --python {interpreter} --no-deps --reinstall-package {IDX} {IDX}==1.0",
        f"automl-setup verify --deep --python {shlex.quote(str(env))}",
    ]
    remedy = deep.stdout.split("remedy: ", 1)[1]
    assert remedy.startswith("restore the edited dependencies, in the environment and in uv's")
    assert all(f"`{command}`" in remedy for command in commands)

    # The remedy as given, with the install's cache.
    for command in commands[:-1]:
        subprocess.run(shlex.split(command), env={**os.environ, **linked.env()}, check=True)
    restored = linked.cli(*shlex.split(commands[-1])[1:])
    assert restored.code == 0, restored.output
    assert dep.read_bytes() == original
    assert linked.cached_with(edit) == [], "uv's cache still holds the edited file"
    # A new environment installed from that cache gets the recorded bytes.
    other = tmp_path / "other"
    assert linked.install(other, "--branch", "main", "--create-env").code == 0
    assert linked.cli("verify", "--python", str(other), "--deep").code == 0
