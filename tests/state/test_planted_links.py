"""No state access follows a link planted in a state directory, and no state others could
have rewritten is trusted (docs/security.md, "Shared and hostile file systems"). Each writer
and reader of `fsutil` meets a link to a victim outside whose content is a valid file of the
kind (content checks cannot save it): refused, the victim byte-identical. A world-writable or
foreign-owned state folder is refused, a group-writable one accepted, a linked workspace (the
edge) followed. And a walk of the code: no module but `fsutil` opens a file, except those
listed here with the reason they are not state."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_server import fsutil
from mcp_server.environment.wheelstore import WheelEntry, WheelStore
from mcp_server.errors import SetupError

ROOT = Path(__file__).resolve().parents[2] / "mcp_server"
LINE = b'{"attempt":1,"event":"started"}\n'


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """An experiment's state folder in a workspace: `<ws>/.automl-setup/exp/`."""
    folder = tmp_path / "ws" / ".automl-setup" / "exp"
    folder.mkdir(parents=True)
    return folder


def plant(link: Path, tmp_path: Path, content: bytes = LINE) -> Path:
    victim = tmp_path / "outside" / f"victim-{link.name}"
    victim.parent.mkdir(exist_ok=True)
    victim.write_bytes(content)
    link.symlink_to(victim)
    return victim


def _numbered(path: Path) -> None:
    with fsutil.numbered_append(path, key="attempt", what="ledger") as (n, write):
        write({"attempt": n})


def _lock(path: Path) -> None:
    with fsutil.exclusive_lock(path, step="lock", holder="it"):
        pass


def _log(path: Path) -> None:
    os.close(fsutil.open_log(path))


WRITERS: dict[str, Callable[[Path], object]] = {
    "atomic replace (record, binding-like JSON)": lambda p: fsutil.atomic_write_bytes(p, LINE),
    "exclusive create (binding)": lambda p: fsutil.exclusive_create(p, LINE),
    "create new or same (report, lock file)": lambda p: fsutil.create_new_or_same(
        p, LINE, step="report", what="it", remedy="-"
    ),
    "append (install history)": lambda p: fsutil.append_json_line(p, {"event": "x"}),
    "numbered append (attempts ledger, receipts)": _numbered,
    "lock (environment, experiment)": _lock,
    "log (attempt log handed to the engine)": _log,
    "read (record, binding, ledger)": fsutil.read_file,
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_link_at_a_state_file_is_refused_and_its_target_untouched(
    writer: str, state: Path, tmp_path: Path
) -> None:
    link = state / "attempts.jsonl"
    victim = plant(link, tmp_path)
    with pytest.raises(SetupError) as refused:
        WRITERS[writer](link)
    assert f"{link} is a symbolic link (to {victim})" in refused.value.cause
    assert "remove the link" in str(refused.value.remedy)
    assert victim.read_bytes() == LINE and link.is_symlink()


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_linked_state_folder_is_refused_on_the_way(writer: str, tmp_path: Path) -> None:
    """`.automl-setup/exp` itself a link to a folder outside holding a valid file."""
    sidecar = tmp_path / "ws" / ".automl-setup"
    sidecar.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "attempts.jsonl").write_bytes(LINE)
    (sidecar / "exp").symlink_to(elsewhere)
    with pytest.raises(SetupError) as refused:
        WRITERS[writer](sidecar / "exp" / "attempts.jsonl")
    assert f"{sidecar / 'exp'} is a symbolic link (to {elsewhere})" in refused.value.cause
    assert sorted(p.name for p in elsewhere.iterdir()) == ["attempts.jsonl"]
    assert (elsewhere / "attempts.jsonl").read_bytes() == LINE


def test_a_linked_workspace_is_the_edge_and_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    (tmp_path / "ws").symlink_to(real)
    path = tmp_path / "ws" / ".automl-setup" / "exp" / "attempts.jsonl"
    fsutil.append_json_line(path, {"event": "x"})
    assert (real / ".automl-setup" / "exp" / "attempts.jsonl").read_bytes() == b'{"event":"x"}\n'
    assert fsutil.read_file(path) == b'{"event":"x"}\n'


def test_temporary_names_are_unpredictable_and_never_left(state: Path) -> None:
    target = state / "record.json"
    guessed = state / f".record.json.tmp-{os.getpid()}"  # the name an earlier release used
    guessed.symlink_to(state.parent / "victim")
    fsutil.atomic_write_bytes(target, b"{}\n")
    fsutil.atomic_write_bytes(target, b"{}\n")
    assert target.read_bytes() == b"{}\n"
    assert sorted(p.name for p in state.iterdir()) == [guessed.name, "record.json"]
    assert not (state.parent / "victim").exists()


def test_world_writable_state_is_refused_group_writable_accepted(state: Path) -> None:
    path = state / "history.jsonl"
    state.chmod(0o777)
    with pytest.raises(SetupError) as refused:
        fsutil.append_json_line(path, {"event": "x"})
    assert f"the state directory {state} is writable by everyone (mode 777)" in (
        refused.value.cause
    )
    assert not path.exists()
    state.chmod(0o1777)  # sticky, as /tmp: nobody may replace another's entries
    fsutil.append_json_line(path, {"event": "x"})
    state.chmod(0o775)  # a team's shared workspace
    fsutil.append_json_line(path, {"event": "y"})
    path.chmod(0o666)
    with pytest.raises(SetupError, match=r"the state file .* is writable by everyone"):
        fsutil.read_file(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_state_owned_by_someone_else_is_refused(state: Path) -> None:
    path = state / "engine-record.json"
    path.write_bytes(b"{}\n")
    os.chown(path, 4242, 4242)  # neither this user, root, nor the folder's owner
    with pytest.raises(SetupError) as refused:
        fsutil.atomic_write_bytes(path, b"[]\n")
    assert "belongs to uid 4242" in refused.value.cause
    assert path.read_bytes() == b"{}\n"
    # A team's folder: group-writable, and the entry in the folder's group (a member's).
    state.chmod(0o775)
    os.chown(path, 4242, state.stat().st_gid)
    assert fsutil.read_file(path) == b"{}\n"


def test_a_link_in_the_wheel_store_is_refused(tmp_path: Path) -> None:
    store = WheelStore(tmp_path / "store")
    store.root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store.root / "wheels").symlink_to(elsewhere)
    wheel = tmp_path / "w-1.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel")
    entry = WheelEntry(
        sha256="0" * 64, wheel_filename=wheel.name, distribution="w", version="1.0",
        origin="reviewed-wheel", source=None, backend=None, time="t", member=None,
    )  # fmt: skip
    with pytest.raises(SetupError, match="wheels is a symbolic link"):
        store.put(wheel, entry)
    assert list(elsewhere.iterdir()) == []


# Every call that opens or writes a file outside fsutil, with why it is not state.
NOT_STATE = {
    ("pausepoints.py", "Path(marker).write_text"): "a test's fault-injection mark",
    ("tracking/sync.py", "path.write_bytes"): "an artifact to upload, in private scratch",
    ("environment/verify.py", "script.open"): "reads a script of the environment, not state",
    ("experiments/manifest.py", "os.open"): "reads the user's manifest, wherever they keep it",
    ("faces/cli/main.py", "os.open"): "/dev/null in place of a closed stdout",
    ("faces/mcp/lifecycle.py", "os.open"): "/dev/null in place of stdio",
    ("faces/cli/demo.py", "path.write_text"): "the demo's own new folder",
    ("faces/cli/demo.py", "DemoRun.open"): "not a file: the demo's folder object",
    ("faces/cli/demo.py", "tempfile.mkdtemp"): "the demo's own new folder (private)",
    ("faces/cli/demo_sft.py", "path.write_text"): "the demo's own new folder",
    ("faces/cli/demo_sft.py", "DemoRun.open"): "not a file: the demo's folder object",
    ("faces/cli/demo_sft.py", "log.open"): "the demo's own new folder",
    ("faces/mcp/catalog.py", "CATALOG_PATH.write_text"): "a developer tool: this checkout",
    ("schemagen.py", "path.write_text"): "a developer tool: this checkout",
    ("docgen.py", "path.write_text"): "a developer tool: this checkout (docs/reference/)",
    ("environment/cachelinks.py", "path.open"): "an engine file of the environment being "
    "installed (its RECORD), regular (lstat), under the environment's lock",
    ("environment/cachelinks.py", "tmp.open"): "the copy made beside it (O_EXCL, random name)",
    ("scratch.py", "tempfile.mkdtemp"): "private scratch (0700, unpredictable)",
    ("skills/sync.py", "tempfile.mkstemp"): "the project's skill mirrors (exclusive temp)",
    ("skills/sync.py", "os.fdopen"): "the descriptor mkstemp made",
    ("source/wheelbuild.py", "path.open"): "hashes a file the caller names (stored wheels: fsutil)",
    ("children/uv.py", "os.fdopen"): "the descriptor fsutil.open_log made",
    ("source/sourcerepo.py", "pyproject.write_text"): "the demo's and tests' own new repository",
    (
        "source/sourcerepo.py",
        "(target / 'src' / REFERENCE_IMPORT / '_build_marker.py').write_text",
    ): "the demo's and tests' own new repository",
    ("source/sourcerepo.py", "path.write_text"): "the demo's and tests' own new repository",
    # Run in a target's interpreter, which has no automl-setup (standard library only).
    ("target_side/probe.py", "open"): "reads torch's version.py in the environment probed",
    ("target_side/bytecode.py", "open"): "reads the environment's sources and bytecode",
    ("target_side/bytecode.py", "os.open"): "the environment's bytecode (O_EXCL) and the "
    "bytecode cache's entries through its folder's descriptor, O_NOFOLLOW (bytecache.py)",
    ("target_side/bytecode.py", "os.fdopen"): "a duplicate of the descriptor os.open made",
}
OPENERS = {"open", "write_bytes", "write_text", "fdopen", "mkstemp", "mkdtemp"}


def file_opening_calls() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("reference_engine/", "fsutil/")):
            continue  # the engine is another program; fsutil is the rule itself
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "open") or (
                isinstance(func, ast.Attribute) and func.attr in OPENERS
            ):
                found.add((rel, ast.unparse(func)))
    return found


def test_no_module_but_fsutil_opens_state() -> None:
    found = file_opening_calls()
    assert found - set(NOT_STATE) == set(), "open state through mcp_server.fsutil"
    assert set(NOT_STATE) - found == set(), "a listed call is gone: drop it from NOT_STATE"
    assert all(len(why) > 10 for why in NOT_STATE.values())  # every entry says why
