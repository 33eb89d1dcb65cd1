"""Closure members without any install: the RECORD digest (what it leaves out, and a digest of
the first closure records still matching), PEP 610 origins written back as they were read, a
wheel packed from an installed distribution (exact, deterministic, refused when a file was
edited), the wheel store's entry formats and the `store keep` arguments."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from mcp_server.environment.closure import DirectUrl, parse_direct_url, read_closure
from mcp_server.environment.identity import closure_differences
from mcp_server.environment.memberwheel import pack_installed, set_direct_url
from mcp_server.environment.wheelstore import SIDECAR, WheelStore
from mcp_server.errors import InvalidInput, SetupError
from mcp_server.experiments.storeops import StoreRequest
from mcp_server.source.wheelbuild import record_hash, sha256_file
from mcp_server.values import ExperimentId, WorkspacePath

SHEBANG = b"#!/envs/one/bin/python\n"


def installed(prefix: Path, script: bytes = SHEBANG + b"import tool\n") -> Path:
    """A distribution `tool` 1.0 as an installer leaves it in `prefix`: a module, a console
    script (entry point), a plain script, a data file, uv's cache note, bytecode."""
    site = prefix / "lib" / "python3.11" / "site-packages"
    dist = site / "tool-1.0.dist-info"
    files = {
        "tool/__init__.py": b"X = 1\n",
        f"{dist.name}/METADATA": b"Metadata-Version: 2.1\nName: tool\nVersion: 1.0\n",
        f"{dist.name}/WHEEL": b"Wheel-Version: 1.0\nTag: py3-none-any\n",
        f"{dist.name}/entry_points.txt": b"[console_scripts]\ntool = tool:main\n",
        f"{dist.name}/INSTALLER": b"uv\n",
        f"{dist.name}/uv_cache.json": b"{}\n",
        "../../../bin/tool": SHEBANG + b"from tool import main\n",
        "../../../bin/helper": script,
        "../../../share/tool/data.txt": b"data\n",
    }
    rows = []
    for rel, data in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rows.append(f"{rel},{record_hash(data)},{len(data)}")
    rows += ["tool/__pycache__/__init__.cpython-311.pyc,,", f"{dist.name}/RECORD,,"]
    (dist / "RECORD").write_text("\n".join(rows) + "\n")
    return dist


def closure_of(prefix: Path) -> dict:
    site = prefix / "lib" / "python3.11" / "site-packages"
    return read_closure([site], {}, "engine", ["tool"], [])


def test_the_digest_leaves_out_what_the_environment_writes(tmp_path: Path) -> None:
    installed(tmp_path / "one")
    # In another environment the scripts start with that environment's interpreter.
    two = installed(tmp_path / "two", SHEBANG.replace(b"one", b"two") + b"import tool\n")
    assert record_hash(SHEBANG + b"import tool\n") not in (two / "RECORD").read_text()
    first, second = closure_of(tmp_path / "one"), closure_of(tmp_path / "two")
    assert first["tool"].record_sha256 == second["tool"].record_sha256
    # A record of the first closure format kept the scripts in: still the same files.
    legacy = first["tool"].model_copy(update={"record_sha256": first["tool"].first_digest()})
    assert legacy.record_sha256 != first["tool"].record_sha256
    assert closure_differences({"tool": legacy}, first) == []
    assert [d.field for d in closure_differences({"tool": legacy}, second)] == [
        "closure.tool.record_sha256"
    ]


@pytest.mark.parametrize(
    "raw",
    [
        {"url": "file:///r.git", "vcs_info": {"vcs": "git", "commit_id": "a" * 40}},
        {
            "url": "file:///r.git",
            "vcs_info": {"vcs": "git", "commit_id": "a" * 40, "requested_revision": "main"},
            "subdirectory": "pkg",
        },
        {"url": "file:///t.tar.gz", "archive_info": {}},
        {"url": "file:///t.whl", "archive_info": {"hash": "sha256=ab", "hashes": {"sha256": "ab"}}},
        {"url": "file:///src", "dir_info": {}},
        {"url": "file:///src", "dir_info": {"editable": True}},
    ],
)
def test_an_origin_is_written_back_as_it_was_read(raw: dict, tmp_path: Path) -> None:
    direct = parse_direct_url(json.dumps(raw))
    assert isinstance(direct, DirectUrl)
    assert direct.kind == next(k for k in ("vcs", "archive", "dir") if f"{k}_info" in raw)
    assert direct.pep610() == raw
    dist = installed(tmp_path)
    set_direct_url(dist, direct.pep610())
    assert json.loads((dist / "direct_url.json").read_text()) == raw
    assert closure_of(tmp_path)["tool"].direct_url == direct
    set_direct_url(dist, None)  # a member from an index has none, nor its RECORD line
    assert not (dist / "direct_url.json").exists()
    assert "direct_url.json" not in (dist / "RECORD").read_text()


def test_a_packed_wheel_holds_exactly_the_installed_files(tmp_path: Path) -> None:
    dist = installed(tmp_path / "env")
    out = tmp_path / "out"
    out.mkdir()
    wheel = pack_installed(dist, tmp_path / "env", out)
    assert wheel.name == "tool-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        helper = archive.read("tool-1.0.data/scripts/helper")
        record = archive.read("tool-1.0.dist-info/RECORD").decode()
    assert names == {
        "tool/__init__.py",
        "tool-1.0.dist-info/METADATA",
        "tool-1.0.dist-info/WHEEL",
        "tool-1.0.dist-info/entry_points.txt",
        "tool-1.0.dist-info/RECORD",
        "tool-1.0.data/scripts/helper",
        "tool-1.0.data/data/share/tool/data.txt",
    }  # no installer files, no bytecode, no entry-point script (written again from its entry)
    assert helper == b"#!python\nimport tool\n"
    assert f"tool-1.0.data/scripts/helper,{record_hash(helper)},{len(helper)}" in record
    first = sha256_file(wheel)
    assert sha256_file(pack_installed(dist, tmp_path / "env", out)) == first  # deterministic


def test_an_edited_file_is_never_packed(tmp_path: Path) -> None:
    dist = installed(tmp_path / "env")
    (dist.parent / "tool" / "__init__.py").write_text("X = 2\n")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(SetupError) as refused:
        pack_installed(dist, tmp_path / "env", out)
    assert "tool/__init__.py was changed since it was installed" in refused.value.cause
    assert list(out.iterdir()) == []


def _entry(store: WheelStore, sha: str, fields: dict) -> None:
    folder = store.entry_dir(sha)
    folder.mkdir(parents=True)
    (folder / "w-1.0-py3-none-any.whl").write_bytes(b"wheel")
    (folder / SIDECAR).write_text(json.dumps(fields))


def test_store_entries_of_both_formats_are_read_strictly(tmp_path: Path) -> None:
    store = WheelStore(tmp_path)
    sha = hashlib.sha256(b"wheel").hexdigest()
    v1 = {
        "schema_version": 1, "sha256": sha, "wheel_filename": "w-1.0-py3-none-any.whl",
        "distribution": "w", "version": "1.0", "origin": "reviewed-wheel", "source": None,
        "backend": None, "time": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    _entry(store, sha, v1)
    assert store.check(sha).entry.member is None  # format 1: an engine's wheel
    other = WheelStore(tmp_path / "other")
    _entry(other, sha, {**v1, "schema_version": 2, "origin": "closure-member", "member": None})
    with pytest.raises(SetupError) as damaged:
        other.check(sha)
    assert "names what it was packed from" in damaged.value.cause
    third = WheelStore(tmp_path / "third")
    _entry(third, sha, {**v1, "schema_version": 2})  # format 2 without `member`
    with pytest.raises(SetupError, match="missing field"):
        third.check(sha)


def test_keep_takes_an_experiment_and_only_keep_does(tmp_path: Path) -> None:
    workspace = WorkspacePath(str(tmp_path))
    with pytest.raises(InvalidInput, match="keep needs the experiment and its workspace"):
        StoreRequest(action="keep", workspace=workspace)
    with pytest.raises(InvalidInput, match="only keep takes them"):
        StoreRequest(action="list", experiment_id=ExperimentId("exp"), workspace=workspace)
    keep = StoreRequest(action="keep", experiment_id=ExperimentId("exp"), workspace=workspace)
    assert keep.experiment_id == "exp"
