"""Fixtures of the engine tests: the closure's world (support/closure.py), for the two files
that install from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.closure import DEPA, DEPB, IDX, DepRepo, World

from mcp_server.source.sourcerepo import SourceRepository


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    links = tmp_path / "find-links"
    links.mkdir()
    depb = DepRepo(tmp_path, DEPB, [])
    depa = DepRepo(tmp_path, DEPA, [f"{DEPB} @ {depb.url}", f"{IDX}>=1.0"])
    world = World(SourceRepository(tmp_path / "engine"), depa, depb, links)
    world.add_index_version("1.0")
    world.engine.commit_engine("main", marker="main-1", dependencies=[f"{DEPA} @ {depa.url}"])
    pinned = f"{DEPA} @ {depa.url}@{depa.head()}"
    world.engine.commit_engine("dev/pinned", base="main", marker="p", dependencies=[pinned])
    monkeypatch.setenv("UV_FIND_LINKS", str(links))  # the CLI processes inherit it
    return world
