"""Fixtures of the release tests: this checkout built once per session into an sdist and a
wheel (support/release.py), and a real package index on 127.0.0.1 (pypiserver) per test.

A missing pypiserver, passlib or twine skips the index tests, except where
AUTOML_REQUIRE_INDEX=1 (CI): there it fails them."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.release import (
    PackageIndex,
    ReleaseDists,
    build_dists,
    commit_epoch,
    commit_tree,
    copy_checkout,
    plant_litter,
    project_version,
)

REQUIRE_ENV = "AUTOML_REQUIRE_INDEX"


@pytest.fixture(scope="session")
def release_dists(tmp_path_factory: pytest.TempPathFactory) -> ReleaseDists:
    """This checkout's sdist and wheel, built once per session from a copy of it committed to
    a git repository of its own (a clean clone of the release's commit) that also holds a
    developer's litter (a .venv, bytecode, caches; untracked), at HEAD's commit time."""
    root = tmp_path_factory.mktemp("release")
    version = project_version()
    tree = copy_checkout(root / "checkout", version)
    commit = commit_tree(tree)
    plant_litter(tree)
    epoch = commit_epoch()
    sdist, wheel = build_dists(tree, root / "dist", epoch)
    return ReleaseDists(tree, sdist, wheel, version, epoch, f"{version}+g{commit}")


def require_index() -> None:
    """Skip the test without pypiserver, passlib or twine; fail it where AUTOML_REQUIRE_INDEX=1."""
    missing = [m for m in ("pypiserver", "passlib", "twine") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    message = f"missing {', '.join(missing)} for the local package index (pip install -e '.[test]')"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {message}", pytrace=False)
    pytest.skip(message)


def _serve(root: Path, private: bool) -> Iterator[PackageIndex]:
    require_index()
    index = PackageIndex(root, private=private)
    try:
        yield index.start()
    finally:
        index.stop()


@pytest.fixture
def package_index(tmp_path: Path) -> Iterator[PackageIndex]:
    """An empty pypiserver on a free loopback port: uploads need its user and password, and a
    project it does not hold is redirected to PyPI. Stopped at teardown, also on failure."""
    yield from _serve(tmp_path / "index", private=False)


@pytest.fixture
def private_index(tmp_path: Path) -> Iterator[PackageIndex]:
    """The same, as a team's own index: every download and listing wants the login too."""
    yield from _serve(tmp_path / "index", private=True)
