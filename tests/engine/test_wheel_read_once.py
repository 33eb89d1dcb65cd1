"""Each thing read once per install (issue 44): the artifact carries the metadata and the sha256
it read, and the store, the reviewed-wheel check and the install use them. Counted with a
profiler on a real wheel file and a real store."""

from __future__ import annotations

import sys
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from mcp_server.environment import artifact
from mcp_server.environment.records import SourceIdentity
from mcp_server.environment.wheelstore import STORE_ENV
from mcp_server.source.profile import EngineProfile
from mcp_server.source.wheelbuild import BuiltWheel, read_wheel_metadata, sha256_file

# What reads a wheel: its metadata (the zip's METADATA and RECORD), its bytes for a sha256.
READERS = {
    ("mcp_server.source.wheelbuild", "read_wheel_metadata"): "metadata",
    ("mcp_server.source.wheelbuild", "sha256_file"): "hash",
    ("mcp_server.environment.wheelstore", "_hash"): "hash in the store",
}
PROFILE = EngineProfile(distribution="demo-engine", requirement="==0.1")
SOURCE = SourceIdentity(
    repository="file:///nowhere/repo.git",
    subdirectory="packages/demo",
    requested_ref="refs/heads/main",
    commit="a" * 40,
    subtree_id="b" * 40,
    commit_time=1_700_000_000,
)


@contextmanager
def reads() -> Iterator[Counter[str]]:
    counted: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        key = (frame.f_globals.get("__name__"), frame.f_code.co_name)
        if event == "call" and key in READERS:
            counted[READERS[key]] += 1  # type: ignore[index]

    sys.setprofile(profile)
    try:
        yield counted
    finally:
        sys.setprofile(None)


def make_wheel(folder: Path) -> Path:
    """A real (pure, tiny) wheel of `demo-engine` 0.1."""
    folder.mkdir(parents=True)
    wheel = folder / "demo_engine-0.1-py3-none-any.whl"
    info = "demo_engine-0.1.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("demo_engine/__init__.py", "")
        zf.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: demo-engine\nVersion: 0.1\n")
        zf.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        zf.writestr(f"{info}/RECORD", f"demo_engine/__init__.py,,\n{info}/RECORD,,\n")
    return wheel


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "store"))
    return tmp_path / "store"


def test_a_reviewed_wheel_is_read_once_and_its_copy_hashed_once(
    tmp_path: Path, store: Path
) -> None:
    wheel = make_wheel(tmp_path / "in")
    sha = sha256_file(wheel)
    with reads() as counted:
        got = artifact.reviewed_wheel(wheel, sha, PROFILE)
    # The file hashed against the review, its metadata read for the check, the store's copy
    # hashed as it is made: nothing read again.
    assert counted == {"hash": 1, "metadata": 1, "hash in the store": 1}
    assert got.wheel.parent == store / "wheels" / sha
    assert got.meta == read_wheel_metadata(got.wheel)  # what was carried is the stored wheel's
    assert (got.build.distribution, got.build.version, got.build.wheel_sha256) == (
        "demo-engine",
        "0.1",
        sha,
    )
    assert got.build.record_digest == got.meta.record_digest
    with reads() as again:  # already in the store: its entry is checked, re-hashed on use
        artifact.reviewed_wheel(wheel, sha, PROFILE)
    assert again == {"hash": 1, "metadata": 1, "hash in the store": 1}


def test_a_built_wheel_is_read_once_on_its_way_into_the_store(tmp_path: Path, store: Path) -> None:
    wheel = make_wheel(tmp_path / "dist")
    built = BuiltWheel(wheel, sha256_file(wheel), "hatchling.build")
    with reads() as counted:
        got = artifact.store_built(built, SOURCE)
    assert counted == {"metadata": 1, "hash in the store": 1}
    assert got.meta == read_wheel_metadata(got.wheel)
    assert (got.source, got.build.backend, got.build.wheel_sha256) == (
        SOURCE,
        "hatchling.build",
        built.sha256,
    )
