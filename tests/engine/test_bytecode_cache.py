"""The bytecode cache (environment/bytecache.py, target_side/bytecode.py `compile CACHE`): a
source compiled once by an interpreter is linked into every environment holding it; an entry
cut short, edited, compiled by another interpreter or holding other code is never linked, but
dropped and compiled again; the cache's folder is trusted as the wheel store is."""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.mounts import fill, tmpfs

from mcp_server.environment import bytecache
from mcp_server.environment.precompile import compile_sources
from mcp_server.environment.probe import probe_interpreter
from mcp_server.target_side import bytecode as pyc_side

SOURCE = "def f():\n    return {'a', 'b'}\n\nVALUE = 1\n"


def environment(root: Path, text: str = SOURCE) -> str:
    """An environment's module: `root/pkg/mod.py` holding `text`."""
    path = root / "pkg" / "mod.py"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def entries(cache: Path) -> list[Path]:
    return sorted(cache.iterdir())


def entry_of(cache: Path, text: str = SOURCE) -> Path:
    """The one entry of `text` in `cache`."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    (found,) = [p for p in cache.iterdir() if p.name.startswith(digest)]
    return found


def plant(cache: Path, data: bytes, text: str = SOURCE) -> Path:
    """`data` in `cache` as the entry of `text`, named by its own bytes (a whole file)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    entry = cache / f"{digest}-{hashlib.sha256(data).hexdigest()[:32]}.pyc"
    entry.write_bytes(data)
    return entry


def compiled_right(source: str) -> bool:
    """Whether the source's bytecode in its environment is a checked-hash pyc Python loads,
    holding exactly what the source compiles to."""
    data = Path(importlib.util.cache_from_source(source)).read_bytes()
    text = Path(source).read_bytes()
    return (
        int.from_bytes(data[4:8], "little") == pyc_side.CHECKED_HASH
        and pyc_side.loaded(source, data)
        and marshal.loads(data[16:]) == compile(text, source, "exec", dont_inherit=True)
    )


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    return folder


def test_a_second_environment_gets_its_bytecode_by_a_link_to_the_cache(
    tmp_path: Path, cache: Path
) -> None:
    first, second = environment(tmp_path / "one"), environment(tmp_path / "two")
    answer = pyc_side.compile_missing([first], pyc_side.Cache(str(cache)))
    assert answer == {"compiled": 1, "linked": 0, "dropped": []}
    (entry,) = entries(cache)
    assert entry.stat().st_mode & 0o777 == 0o444  # read-only: a link never edits it
    answer = pyc_side.compile_missing([second], pyc_side.Cache(str(cache)))
    assert answer == {"compiled": 0, "linked": 1, "dropped": []}
    for source in (first, second):
        pyc = Path(importlib.util.cache_from_source(source))
        assert pyc.stat().st_ino == entry.stat().st_ino
        assert compiled_right(source)
    assert entries(cache) == [entry]
    # The second environment's Python runs the linked file under its own source's name.
    code = f"import sys; sys.path.insert(0, {str(tmp_path / 'two')!r}); import pkg.mod as m; "
    shown = subprocess.run(
        [sys.executable, "-I", "-B", "-c", code + "print(m.f.__code__.co_filename)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert shown.stdout.strip() == second


def test_another_file_system_gets_a_copy(tmp_path: Path, cache: Path) -> None:
    pyc_side.compile_missing([environment(tmp_path / "one")], pyc_side.Cache(str(cache)))
    with tmpfs(tmp_path / "fs", size="4m") as mount:
        source = environment(mount)
        answer = pyc_side.compile_missing([source], pyc_side.Cache(str(cache)))
        assert answer == {"compiled": 0, "linked": 1, "dropped": []}
        pyc = Path(importlib.util.cache_from_source(source))
        assert pyc.read_bytes() == entry_of(cache).read_bytes()
        assert compiled_right(source)
        assert sorted(p.name for p in pyc.parent.iterdir()) == [pyc.name]  # no temporary file


# Another Python's magic number: 3.10's, or 3.11's where this is 3.10.
OTHER_MAGIC = 3439 if importlib.util.MAGIC_NUMBER[:2] != (3439).to_bytes(2, "little") else 3495
OTHER_MAGIC_HEX = OTHER_MAGIC.to_bytes(2, "little").hex() + "0d0a"


def other_interpreter(data: bytes) -> bytes:
    """`data` as another Python's compile would head it: another version's magic number."""
    return OTHER_MAGIC.to_bytes(2, "little") + b"\r\n" + data[4:]


def other_code(data: bytes) -> bytes:
    """`data`'s header (this source's hash) over the code of another source."""
    return data[:16] + marshal.dumps(compile("VALUE = 2\n", "x.py", "exec", dont_inherit=True))


def cut_short(data: bytes) -> bytes:
    return data[: len(data) // 2]


def edited(data: bytes) -> bytes:
    return data[:-3] + bytes(b ^ 0xFF for b in data[-3:])


@pytest.mark.parametrize(
    ("damage", "in_place", "why"),
    [
        (cut_short, True, "cut short or edited"),
        (edited, True, "cut short or edited"),
        (
            other_interpreter,
            False,
            f"compiled by another interpreter (magic number {OTHER_MAGIC_HEX})",
        ),
        (other_code, False, "not compiled from its source"),
    ],
    ids=["cut-short", "edited", "another-interpreter", "other-code"],
)
def test_a_damaged_entry_is_never_linked_but_dropped_and_compiled_again(
    tmp_path: Path, cache: Path, damage: Callable[[bytes], bytes], in_place: bool, why: str
) -> None:
    pyc_side.compile_missing([environment(tmp_path / "one")], pyc_side.Cache(str(cache)))
    good = entry_of(cache)
    data = good.read_bytes()
    good.unlink()
    if in_place:  # the file changed after it was named
        bad = good
        bad.write_bytes(damage(data))
    else:  # a whole file named by its bytes: only the check of its content finds it
        bad = plant(cache, damage(data))
    source = environment(tmp_path / "two")
    answer = pyc_side.compile_missing([source], pyc_side.Cache(str(cache)))
    ((name, said),) = answer["dropped"]
    assert (name, answer["compiled"], answer["linked"]) == (bad.name, 1, 0)
    assert said.startswith(why)
    assert not bad.exists()
    assert compiled_right(source)
    linked = Path(importlib.util.cache_from_source(source))
    assert entry_of(cache).read_bytes() == linked.read_bytes()


def test_an_entry_of_another_source_under_this_ones_name_is_dropped(
    tmp_path: Path, cache: Path
) -> None:
    pyc_side.compile_missing(
        [environment(tmp_path / "one", "VALUE = 2\n")], pyc_side.Cache(str(cache))
    )
    other = entry_of(cache, "VALUE = 2\n")
    planted = plant(cache, other.read_bytes())
    source = environment(tmp_path / "two")
    answer = pyc_side.compile_missing([source], pyc_side.Cache(str(cache)))
    assert answer["dropped"] == [[planted.name, "not a checked-hash pyc of this source"]]
    assert compiled_right(source)


def test_a_link_in_the_cache_is_not_followed_used_or_removed(tmp_path: Path, cache: Path) -> None:
    pyc_side.compile_missing([environment(tmp_path / "one")], pyc_side.Cache(str(cache)))
    good = entry_of(cache)
    outside = tmp_path / "outside.pyc"
    good.rename(outside)
    good.symlink_to(outside)
    before = outside.read_bytes()
    source = environment(tmp_path / "two")
    answer = pyc_side.compile_missing([source], pyc_side.Cache(str(cache)))
    assert (answer["compiled"], answer["linked"], answer["dropped"]) == (1, 0, [])
    assert good.is_symlink() and outside.read_bytes() == before
    assert compiled_right(source)
    assert not Path(importlib.util.cache_from_source(source)).samefile(outside)


def test_a_cache_that_cannot_be_written_is_skipped_never_a_refusal(tmp_path: Path) -> None:
    source = environment(tmp_path / "one")
    with tmpfs(tmp_path / "fs", size="1m") as mount:
        full = mount / "cache"
        full.mkdir()
        fill(mount, leave=0)
        answer = pyc_side.compile_missing([source], pyc_side.Cache(str(full)))
        assert answer == {"compiled": 1, "linked": 0, "dropped": []}
        assert list(full.iterdir()) == []  # nothing, not even a temporary file
    assert compiled_right(source)


# ---- the cache's folder, beside the wheel store ----------------------------------------------


def test_the_cache_folder_is_per_interpreter_beside_the_store(tmp_path: Path) -> None:
    probe = probe_interpreter(Path(sys.executable), [])
    folder, why = bytecache.cache_folder(probe, tmp_path / "store")
    assert why == "" and folder is not None
    assert folder.parent == tmp_path / "store" / "bytecode"
    assert folder.name.startswith(f"cpython-{sys.version_info.major}.{sys.version_info.minor}.")


def test_an_untrusted_cache_folder_is_not_used_and_the_compile_goes_on(tmp_path: Path) -> None:
    probe = probe_interpreter(Path(sys.executable), [])
    store = tmp_path / "store"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store.mkdir()
    (store / "bytecode").symlink_to(elsewhere)
    folder, why = bytecache.cache_folder(probe, store)
    assert folder is None and "link" in why
    assert list(elsewhere.iterdir()) == []
    (store / "bytecode").unlink()
    (store / "bytecode").mkdir(mode=0o777)
    os.chmod(store / "bytecode", 0o777)  # writable by everyone
    folder, why = bytecache.cache_folder(probe, store)
    assert folder is None and "writable" in why
    source = environment(tmp_path / "one")
    done = compile_sources(Path(sys.executable), [source], folder)
    assert (done.compiled, done.linked) == (1, 0)
    assert list((store / "bytecode").iterdir()) == []


def test_the_engines_own_sources_get_copies_an_edit_in_place_stays_there(
    tmp_path: Path, cache: Path
) -> None:
    pyc_side.compile_missing([environment(tmp_path / "one")], pyc_side.Cache(str(cache)))
    source = environment(tmp_path / "two")
    answer = pyc_side.compile_missing([source], pyc_side.Cache(str(cache)), frozenset([source]))
    assert answer == {"compiled": 0, "linked": 1, "dropped": []}
    pyc = Path(importlib.util.cache_from_source(source))
    assert not pyc.samefile(entry_of(cache)) and compiled_right(source)
    pyc.write_bytes(b"edited in place")
    assert entry_of(cache).read_bytes() != b"edited in place"


def test_a_cache_folder_gone_by_the_time_the_compile_runs_is_no_refusal(tmp_path: Path) -> None:
    source = environment(tmp_path / "one")
    done = compile_sources(Path(sys.executable), [source], tmp_path / "gone")
    assert (done.compiled, done.linked) == (1, 0)
    assert compiled_right(source)
