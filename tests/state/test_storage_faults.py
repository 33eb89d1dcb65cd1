"""Storage that fails as shared clusters' does, on real file systems (tests/support/mounts.py):
full (ENOSPC), over quota (EDQUOT) and remounted read-only (EROFS). Every write automl-setup
makes there is refused with the step, the system's own cause and a remedy for that cause;
nothing that was there changes (the old engine still verifies and starts, every byte of state
is still there, no bytecode appears in the environment, no experiment id is burned); once the
storage is healthy again the same commands run."""

from __future__ import annotations

import errno
import marshal
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import mcp as mcp_support
from support.cli import profile_args, run_cli
from support.engines import engine_bytecode, engine_marker, install_main
from support.experiments import Reaper, make_interrupted, write_manifest
from support.mounts import FAULTS, Fault, faulty_fs, fill, tmpfs
from support.trees import tree_digest

from mcp_server.environment.precompile import compile_sources
from mcp_server.errors import SetupError
from mcp_server.fsutil import (
    append_json_line,
    numbered_append,
    storage_cause,
    storage_refusals,
)
from mcp_server.source.sourcerepo import SourceRepository

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=FAULTS)
def fault(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fault]:
    with faulty_fs(request.param, tmp_path) as made:
        yield made


def assert_storage_refusal(output: str, fault: Fault, context: str = "") -> None:
    """One `error:` line with the system's words, its remedy naming the tool that shows the
    cause; never the catch-all for a bug, never a traceback."""
    assert "unexpected failure" not in output and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, context or output
    assert fault.strerror in errors[0], context or output
    assert f"`{fault.tool}" in output, context or output


def snapshot(*roots: Path) -> list[dict[str, str]]:
    """Every file's bytes, but a lock's: each holder writes its pid there (uv's `.lock` too)."""
    return [tree_digest(root, skip=lambda rel: rel.name in ("lock", ".lock")) for root in roots]


@pytest.mark.slow
def test_each_write_on_failing_storage_is_refused_and_changes_nothing(
    fault: Fault, tmp_path: Path, source_repo: SourceRepository, reaper: Reaper
) -> None:
    env, workspace, project = fault.root / "env", fault.root / "runs", fault.root / "project"
    install_main(env, source_repo)
    marker = engine_marker(env)
    # An experiment interrupted after its first trial, in a workspace on the same storage: its
    # resume appends to the attempts ledger and opens a log; its report writes beside it.
    # (Its own environment: an install over one with unfinished experiments is refused anyway.)
    bound = install_main(fault.root / "bound-env", source_repo)
    exp = make_interrupted(fault.root / "old", bound, reaper)
    ids = ["--experiment-id", exp.experiment_id, "--workspace", str(exp.workspace)]
    source_repo.commit_engine("fault-dev", marker="dev build")
    project.mkdir()
    manifest = write_manifest(tmp_path / "m.yaml", experiment_id="on-fault", max_trials=2)
    launch = ["launch", "--manifest", str(manifest), "--workspace", str(workspace),
              "--python", str(env)]  # fmt: skip
    attempts = {
        "install over": ["install", "--branch", "fault-dev", "--python", str(env),
                         *profile_args(source_repo)],
        "install --create-env": ["install", "--branch", "fault-dev", "--python",
                                 str(fault.root / "env2"), "--create-env",
                                 *profile_args(source_repo)],
        "launch": launch,
        "init": ["init", "--project", str(project)],
        "resume": ["resume", *ids, "--manifest", str(exp.manifest), "--python", str(bound)],
        "report": ["report", *ids],
    }  # fmt: skip
    before, compiled = snapshot(env, project), engine_bytecode(env)
    ledgers = {path: path.read_bytes() for path in (exp.attempts_path, exp.engine_ledger)}

    fault.apply()
    for what, argv in attempts.items():
        refused = run_cli(*argv)
        assert refused.code == 1, (what, refused.output)
        if "  engine said: " in refused.stdout:  # a page with room: the engine started, then
            # stopped as it stops; what it said is shown with the storage's remedy
            assert what == "resume" and fault.strerror in refused.stdout, refused.output
            assert f"  remedy: free space on the file system holding {exp.workspace}" in (
                refused.stdout
            )
            continue
        assert_storage_refusal(refused.stderr, fault, what + "\n" + refused.output)
    for path, was in ledgers.items():  # whole lines added, if any, never a part of one
        now = path.read_bytes()
        assert now.startswith(was) and now.endswith(b"\n"), path
    after = snapshot(env, project)
    for was, now in zip(before, after, strict=True):
        assert {k: (v, now.get(k)) for k, v in was.items() if now.get(k) != v} == {}
        assert sorted(set(now) - set(was)) == []
    assert engine_bytecode(env) == compiled
    assert not (fault.root / "env2").exists()
    assert not workspace.exists()
    assert engine_marker(env) == marker  # the old engine still starts

    fault.lift()
    assert run_cli("verify", "--python", str(env)).code == 0
    launched = run_cli(*launch)  # the id was never burned
    assert launched.code == 0, launched.output
    assert exp.cli("resume").code == 0  # the ledger took no torn line
    assert [index for index, _params, _value in exp.finished_trials()] == [0, 1, 2, 3]


def _numbered(path: Path, entry: dict[str, Any]) -> None:
    with numbered_append(path, key="n", what="ledger") as (number, write):
        write({**entry, "n": number})


@pytest.mark.parametrize("append", [_numbered, append_json_line], ids=["numbered", "plain"])
def test_an_append_the_disk_cannot_hold_leaves_the_ledger_line_complete(
    tmp_path: Path, append: Callable[[Path, dict[str, Any]], None]
) -> None:
    """The last page of a ledger has room for part of a line: the write is short, not an
    error. That part is cut off again, so the ledger keeps only whole lines (the attempts and
    receipts ledgers, the install history), and the refusal says why."""
    with tmpfs(tmp_path / "fs", size="1m") as mount:
        ledger = mount / ".automl-setup" / "ledger.jsonl"
        append(ledger, {"n": 1})
        fill(mount, leave=0)
        before = ledger.read_bytes()
        with pytest.raises(SetupError) as refused:
            append(ledger, {"n": 2, "pad": "x" * 8000})
        assert "No space left on device" in refused.value.cause
        assert "`df -h " in refused.value.remedy
        assert ledger.read_bytes() == before


@pytest.mark.slow
async def test_the_mcp_tools_refuse_on_failing_storage_and_change_nothing(
    fault: Fault, tmp_path: Path, source_repo: SourceRepository
) -> None:
    env, workspace = fault.root / "env", fault.root / "runs"
    install_main(env, source_repo)
    marker = engine_marker(env)
    source_repo.commit_engine("fault-dev", marker="dev build")
    manifest = write_manifest(tmp_path / "m.yaml", experiment_id="on-fault", max_trials=2)
    profile = mcp_support.engine_args(source_repo)
    calls = {
        "install_engine": {"python": str(env), "branch": "fault-dev", "profile": profile},
        "launch_experiment": {
            "manifest": str(manifest), "workspace": str(workspace), "python": str(env)
        },
    }  # fmt: skip
    before, compiled = snapshot(env), engine_bytecode(env)

    fault.apply()
    server = [str(mcp_support.BIN / "automl-setup-mcp")]
    async with mcp_support.serve(server, mcp_support.Wire(tmp_path), "legacy") as client:
        for tool, args in calls.items():
            text = mcp_support.error_text(await client.call_tool(tool, args), tool)
            assert fault.strerror in text and f"`{fault.tool}" in text, text
            assert "unexpected" not in text and "Traceback" not in text, text
    assert snapshot(env) == before and engine_bytecode(env) == compiled
    assert not workspace.exists()
    assert engine_marker(env) == marker
    fault.lift()
    assert run_cli("verify", "--python", str(env)).code == 0


def test_bytecode_the_disk_cannot_hold_is_refused_never_written_in_part(tmp_path: Path) -> None:
    """The install's compile (precompile.py) on a disk that fills halfway: a refusal naming the
    file and the storage's remedy, and every bytecode file there is whole (CPython's own
    writer renames a short write into place); no temporary file stays."""
    with tmpfs(tmp_path / "fs", size="1m") as mount:
        sources = []
        for n in range(40):
            source = mount / f"module_{n}.py"
            source.write_text("".join(f"value_{k} = {k!r} * {n}\n" for k in range(400)))
            sources.append(str(source))
        fill(mount, leave=48 << 10)
        with pytest.raises(SetupError) as refused:
            compile_sources(Path(sys.executable), sources)
        assert refused.value.cause.startswith("cannot write the bytecode ")
        assert "No space left on device" in refused.value.cause
        assert "`df -h " in refused.value.remedy
        written = sorted((mount / "__pycache__").iterdir())
        assert written and all(p.suffix == ".pyc" for p in written), written
        for pyc in written:  # each loads whole
            marshal.loads(pyc.read_bytes()[16:])


@pytest.mark.parametrize(
    ("code", "tool"),
    [(errno.ENOSPC, "df -h"), (errno.EDQUOT, "quota -s"), (errno.EROFS, "findmnt -T")],
)
def test_an_oserror_of_failing_storage_no_state_access_caught_is_a_refusal(
    tmp_path: Path, code: int, tool: str
) -> None:
    """Both faces run every operation inside `storage_refusals`: such an OSError (uv's scratch,
    a rollback's copy) is the operation's refusal with the storage's remedy; any other OSError
    is a bug and passes unchanged, to be reported as one."""
    target = tmp_path / "scratch" / "file"
    with pytest.raises(SetupError) as refused, storage_refusals("install"):
        raise OSError(code, os.strerror(code), str(target))
    assert refused.value.step == "install"
    assert refused.value.cause == f"cannot write {target}: {os.strerror(code)}"
    assert f"`{tool}" in refused.value.remedy
    with pytest.raises(PermissionError), storage_refusals("install"):
        raise PermissionError(errno.EACCES, "Permission denied", str(target))


def test_uvs_own_words_for_failing_storage_are_read() -> None:
    said = (
        "error: failed to write to file `/data/env/CACHEDIR.TAG`: Disk quota exceeded "
        "(os error 122)"
    )
    here = Path("/runs")
    assert storage_cause(said, here) == (errno.EDQUOT, Path("/data/env/CACHEDIR.TAG"))
    python = "OSError: [Errno 30] Read-only file system: '/runs/exp/state.json.tmp'"
    assert storage_cause(python, here) == (errno.EROFS, Path("/runs/exp/state.json.tmp"))
    assert storage_cause("engine run: No space left on device", here) == (errno.ENOSPC, here)
    assert storage_cause("error: permission denied (os error 13)", here) is None
