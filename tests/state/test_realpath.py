"""Paths are resolved the way the OS follows them, alike on every Python version: `real_path`
agrees with the kernel (same file, same errors) where `Path.resolve()` did not (3.13 no longer
raises on a symlink loop), and the value types and the MCP roots check built on it refuse a loop
everywhere."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from mcp_server.errors import InvalidInput
from mcp_server.faces.mcp.roots import inside_roots
from mcp_server.fsutil import real_path
from mcp_server.fsutil.realpath import MAX_LINKS
from mcp_server.values import ManifestPath, TargetPath, WorkspacePath


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """a/b/ with links: up (to ..), abs (absolute, to a), rel (relative, to a/b), a
    dangling one, a self-loop, a two-link cycle, and a loop reached through `..`."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("f")
    links = {
        "up": "..",
        "abs": str(tmp_path / "a"),
        "rel": "a/b",
        "dangling": "nowhere/yet",
        "self": "self",
        "ping": "pong",
        "pong": "ping",
        "via": "self/..",
    }
    for name, target in links.items():
        (tmp_path / name).symlink_to(target)
    return tmp_path


def kernel_follows(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno != errno.ELOOP
    return True


def test_existing_paths_resolve_to_the_file_the_kernel_opens(tree: Path) -> None:
    for rel in ("a/b/f", "abs/b/f", "rel/f", "a/b/../b/f", "up/" + tree.name + "/a/b/f",
                "abs/../a/b", "rel/../b/f"):  # fmt: skip
        given = tree / rel
        real = real_path(given)
        assert real.is_absolute() and not any(p.is_symlink() for p in [real, *real.parents])
        assert os.path.samestat(os.stat(real), os.stat(given)), rel
    # `..` after a link leaves the link's target, as the kernel does (not the link's folder).
    assert real_path(tree / "rel" / "..") == tree / "a"


def test_a_part_not_there_yet_is_kept_as_written(tree: Path) -> None:
    assert real_path(tree / "abs" / "new" / "env") == tree / "a" / "new" / "env"
    assert real_path(tree / "dangling" / "x") == tree / "nowhere" / "yet" / "x"
    assert real_path("relative/dir") == Path.cwd() / "relative" / "dir"
    assert real_path("~") == Path.home()


@pytest.mark.parametrize("rel", ["self", "ping", "self/x", "via", "ping/../a"])
def test_a_symlink_loop_is_eloop_like_the_kernel_says(tree: Path, rel: str) -> None:
    assert not kernel_follows(tree / rel)
    with pytest.raises(OSError) as info:
        real_path(tree / rel)
    assert info.value.errno == errno.ELOOP


def test_the_bound_on_links_is_the_kernels(tmp_path: Path) -> None:
    """A chain of MAX_LINKS links resolves, one more is a loop: the kernel's answers too."""
    (tmp_path / "end").mkdir()
    previous = "end"
    for n in range(MAX_LINKS + 1):
        (tmp_path / f"l{n}").symlink_to(previous)
        previous = f"l{n}"
    longest = tmp_path / f"l{MAX_LINKS - 1}"
    assert kernel_follows(longest) and real_path(longest) == tmp_path / "end"
    too_long = tmp_path / f"l{MAX_LINKS}"
    assert not kernel_follows(too_long)
    with pytest.raises(OSError):
        real_path(too_long)


def test_the_value_types_and_the_roots_refuse_a_loop_on_every_version(tree: Path) -> None:
    for kind in (WorkspacePath, ManifestPath):
        with pytest.raises(InvalidInput) as info:
            kind(str(tree / "ping"))
        assert "Too many levels of symbolic links" in info.value.cause, info.value.cause
    assert WorkspacePath(str(tree / "rel")) == str(tree / "a" / "b")
    assert TargetPath(str(tree / "self")) == str(tree / "self")  # named, never resolved
    assert not inside_roots(tree / "self", [tree])
    assert not inside_roots(tree / "a", [tree / "ping"])  # a loop contains nothing
    assert inside_roots(tree / "rel" / "f", [tree / "abs"])
