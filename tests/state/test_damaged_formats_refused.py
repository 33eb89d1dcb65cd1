"""Every persisted format, fed damaged variants of a valid sample: each one is refused by its
reader with a SetupError, the valid one reads back as it was written.

Variants: truncated bytes, not-an-object JSON, a missing field (at every level), an extra
field (at every level), a wrong type in every field, and an unknown format version. Pure and
fast, except one end-to-end run of `automl-setup repair` on damaged journals."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support.cli import run_cli
from support.engines import engine_marker
from support.trees import env_snapshot

from mcp_server.bundle.ownership import RECORD_PATH, InitRecord, OwnedItem, OwnedKey
from mcp_server.bundle.ownership import read_record as read_init
from mcp_server.environment.closure import ClosureMember, DirectUrl
from mcp_server.environment.identity import compute_identity_digest
from mcp_server.environment.records import (
    BuildIdentity,
    EnvironmentInfo,
    FieldDiff,
    HistoryEntry,
    InstallInfo,
    InstallRecord,
    Journal,
    RecordStore,
    SourceIdentity,
)
from mcp_server.errors import SetupError
from mcp_server.experiments.attempts import AttemptEntry
from mcp_server.experiments.binding import Binding, EngineBinding
from mcp_server.experiments.registered import RegisteredExperiment
from mcp_server.persisted import load_persisted

SHA = "a" * 64
COMMIT = "b" * 40
SOURCE = SourceIdentity(
    repository="https://example.org/engine.git",
    subdirectory="packages/engine",
    requested_ref="refs/heads/main",
    commit=COMMIT,
    subtree_id="c" * 40,
    commit_time=1_700_000_000,
)
BUILD = BuildIdentity(
    distribution="automl-refengine",
    version="0.1.0",
    wheel_filename="automl_refengine-0.1.0-py3-none-any.whl",
    wheel_sha256=SHA,
    record_digest=SHA,
    backend="hatchling.build",
)
ENVIRONMENT = EnvironmentInfo(
    python_version="3.11.7",
    implementation="cpython",
    platform="linux",
    dependencies={"numpy": "2.0.0", "absent": None},
    watched={"gepa": None, "torch": "2.4.0"},
    torch_cuda=None,
)
CLOSURE = {
    "depa": ClosureMember(
        version="1.0",
        record_sha256=SHA,
        installer="uv",
        direct_url=DirectUrl(
            url="file:///srv/git/depa.git",
            kind="vcs",
            vcs="git",
            commit_id=COMMIT,
            requested_revision=None,
            subdirectory=None,
            archive_hash=None,
            editable=False,
        ),
        moving=True,
    ),
    "numpy": ClosureMember(
        version="2.0.0", record_sha256=SHA, installer="uv", direct_url=None, moving=False
    ),
}
RECORD = InstallRecord(
    origin="source-build",
    source=SOURCE,
    build=BUILD,
    install=InstallInfo(
        interpreter="/env/bin/python",
        environment="/env",
        installer="uv",
        installer_version="0.5.0",
        tool_version="0.1.0",
        extras=["gpu"],
        transaction="0123456789ab",
        time="2026-01-01T00:00:00+00:00",
    ),
    environment=ENVIRONMENT,
    identity_digest=compute_identity_digest(SOURCE, BUILD, ENVIRONMENT, CLOSURE),
    closure=CLOSURE,
)
HISTORY = HistoryEntry(
    time="2026-01-01T00:00:00+00:00",
    event="installed",
    transaction="0123456789ab",
    commit=COMMIT,
    requested_ref="refs/heads/main",
    distribution="automl-refengine",
    version="0.1.0",
    identity_digest=SHA,
    wheel_sha256=SHA,
)
JOURNAL = Journal(
    txid="0123456789ab",
    pid=4242,
    started="2026-01-01T00:00:00+00:00",
    commit=COMMIT,
    requested_ref="refs/heads/dev/next",
    distribution="automl-refengine",
    previous_distribution="automl-refengine",
    backup=[["/env/lib/python3.11/site-packages/automl_refengine/__init__.py", "000000"]],
    versions_before={"numpy": "2.0.0"},
    new_wheel_record=SHA,
    new_files=["/env/lib/python3.11/site-packages/automl_refengine/__init__.py"],
)
BINDING = Binding(
    experiment_id="exp-1",
    workspace="/ws",
    manifest_path="/ws/manifest.yaml",
    manifest_sha256=SHA,
    engine=EngineBinding(
        identity_digest=RECORD.identity_digest,
        source=SOURCE,
        build=BUILD,
        environment=ENVIRONMENT,
        environment_path="/env",
        interpreter="/env/bin/python",
        cli="automl-refengine",
        extras=["training"],
        closure=CLOSURE,
    ),
    argv=["/env/bin/automl-refengine", "run", "--approve"],
    host="node-1",
    time="2026-01-01T00:00:00+00:00",
    tool_version="0.1.0",
)
ATTEMPT = AttemptEntry(
    time="2026-01-01T00:00:00+00:00",
    action="resume",
    outcome="refused",
    attempt=3,
    host="node-1",
    pid=99,
    exit_code=None,
    environment="/env",
    identity_digest=SHA,
    reason="identity differs",
    differences=[FieldDiff(field="build.version", recorded="0.1.0", found="0.2.0")],
    log="/ws/.automl-setup/exp-1/attempt-3.log",
)
REGISTRY = RegisteredExperiment(experiment_id="exp-1", workspace="/ws", identity_digest=SHA)
INIT_RECORD = InitRecord(
    tool_version="0.1.0",
    bundle_sha256=SHA,
    skills=["automl-setup"],
    agents=["claude", "codex"],
    items=[
        OwnedItem(path=".claude/skills/automl-setup/SKILL.md", key=[], sha256=SHA),
        OwnedItem(
            path=".mcp.json",
            key=["mcpServers", "automl-setup"],
            sha256=SHA,
            keys=[OwnedKey(key=["command"], sha256=SHA)],
        ),
    ],
    updated_at="2026-12-01T00:00:00+00:00",
)

# --------------------------------------------------------------------------------------------
# Readers: the real ones of the record store; the experiment formats through their models'
# strict reader (the functions that read them call exactly that)

Reader = Callable[[Path, bytes], BaseModel]


def read_record(tmp: Path, data: bytes) -> BaseModel:
    store = RecordStore(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    store.record_path.write_bytes(data)
    record = store.read_record()
    assert record is not None
    return record


def read_history_line(tmp: Path, data: bytes) -> BaseModel:
    """The line under test is followed by a valid one, so a truncated line is a damaged line
    in the middle (a torn *last* line is reported, not refused: see its own test)."""
    store = RecordStore(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    valid = HISTORY.model_dump_json().encode()
    store.history_path.write_bytes(data + b"\n" + valid + b"\n")
    entries, torn = store.read_history()
    assert torn is None
    return entries[0]


def read_journal(tmp: Path, data: bytes) -> BaseModel:
    store = RecordStore(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    store.journal_path.write_bytes(data)
    journal = store.journal()
    assert journal is not None
    return journal


def read_init_record(tmp: Path, data: bytes) -> BaseModel:
    (tmp / RECORD_PATH).parent.mkdir(parents=True, exist_ok=True)
    (tmp / RECORD_PATH).write_bytes(data)
    record = read_init(tmp)
    assert record is not None
    return record


def model_reader(model: type[BaseModel], what: str) -> Reader:
    def read(tmp: Path, data: bytes) -> BaseModel:
        return load_persisted(model, data, what=what, path=tmp / what, remedy="restore it")

    return read


FORMATS: dict[str, tuple[BaseModel, Reader]] = {
    "install-record": (RECORD, read_record),
    "history-line": (HISTORY, read_history_line),
    "journal": (JOURNAL, read_journal),
    "binding": (BINDING, model_reader(Binding, "binding")),
    "attempts-line": (ATTEMPT, model_reader(AttemptEntry, "attempts ledger line")),
    "registry-entry": (REGISTRY, model_reader(RegisteredExperiment, "registry entry")),
    "init-record": (INIT_RECORD, read_init_record),
}

# --------------------------------------------------------------------------------------------
# Variants


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) in a JSON tree, containers included, root excluded."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        yield (*prefix, key), item
        if isinstance(item, (dict, list)):
            yield from _paths(item, (*prefix, key))


def _at(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _wrong(value: Any) -> Any:
    """A value of a type no field that held `value` accepts (strict: no coercion)."""
    if value is None:
        return {"wrong": "type"}  # optional fields are str|None, int|None: never a dict
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return 12345
    if isinstance(value, list):
        return "not-a-list"
    return ["not-a-dict"]


def variants(sample: BaseModel) -> Iterator[tuple[str, bytes]]:
    tree = sample.model_dump(mode="json")
    raw = sample.model_dump_json().encode()
    for cut in (0, 1, len(raw) // 2, len(raw) - 1):
        yield f"truncated at {cut}", raw[:cut]
    for text in (b"null", b"[]", b'"text"', b"42", b"{not json"):
        yield f"not an object: {text!r}", text
    for path, value in _paths(tree):
        if _is_model(sample, path[:-1]):  # the keys of a free-form mapping are data
            missing = copy.deepcopy(tree)
            del _at(missing, path[:-1])[path[-1]]
            yield f"missing {path}", json.dumps(missing).encode()
        wrong = copy.deepcopy(tree)
        _at(wrong, path[:-1])[path[-1]] = _wrong(value)
        yield f"wrong type at {path}", json.dumps(wrong).encode()
    for path, value in [((), tree), *_paths(tree)]:
        if isinstance(value, dict) and _is_model(sample, path):
            extra = copy.deepcopy(tree)
            _at(extra, path)["unexpected_field"] = 1
            yield f"extra field at {path or 'top level'}", json.dumps(extra).encode()
    if "schema_version" in tree:
        version_now = tree["schema_version"]
        for version in (0, version_now + 1, str(version_now)):
            other = {**tree, "schema_version": version}
            yield f"schema_version {version!r}", json.dumps(other).encode()


def _is_model(sample: BaseModel, path: tuple[Any, ...]) -> bool:
    """Whether the object at `path` is a model (fixed fields), not a free-form mapping such as
    `dependencies`, whose keys are data."""
    node: Any = sample
    for key in path:
        node = node[key] if isinstance(node, (dict, list)) else getattr(node, key)
    return isinstance(node, BaseModel)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_valid_sample_reads_back(name: str, tmp_path: Path) -> None:
    sample, reader = FORMATS[name]
    assert reader(tmp_path / "state", sample.model_dump_json().encode()) == sample


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_damaged_variant_is_refused(name: str, tmp_path: Path) -> None:
    sample, reader = FORMATS[name]
    accepted = []
    count = 0
    fields = sum(1 for _ in _paths(sample.model_dump(mode="json")))
    for number, (label, data) in enumerate(variants(sample)):
        count += 1
        try:
            reader(tmp_path / f"v{number}", data)
        except SetupError as exc:
            assert exc.remedy, label
            newer = label == f"schema_version {sample.model_dump().get('schema_version', 0) + 1}"
            if newer:  # a newer automl-setup's file: named so, never called damaged
                assert "newer than this automl-setup" in exc.cause, (label, exc)
                assert "was written in format" in exc.cause and "left as it is" in exc.cause
            else:
                assert "not a valid" in exc.cause or "not valid JSON" in exc.cause, (label, exc)
        else:
            accepted.append(label)
    assert accepted == []
    assert count > 2 * fields  # the generator really produced variants for every field


@pytest.mark.parametrize("name", ["install-record", "binding", "init-record"])
def test_a_newer_format_names_the_version_that_wrote_it_and_stays_as_it_is(
    name: str, tmp_path: Path
) -> None:
    """A file a newer automl-setup wrote (a downgrade reading it) is refused as such: its
    format, the writer's version (each of these formats names it) and the remedy; never called
    damaged, never read as something else."""
    sample, reader = FORMATS[name]
    tree = sample.model_dump(mode="json")
    newer = {**tree, "schema_version": tree["schema_version"] + 7}
    place = newer["install"] if "install" in newer else newer.get("engine", {}).get("install")
    writer = place or newer
    writer["tool_version"] = "9.9.9"
    with pytest.raises(SetupError) as info:
        reader(tmp_path / "v", json.dumps(newer).encode())
    cause = info.value.cause
    assert f"was written in format {tree['schema_version'] + 7} by automl-setup 9.9.9" in cause
    assert "newer than this automl-setup" in cause and "damaged" not in cause
    assert "uv tool install 'automl-setup>=9.9.9'" in info.value.remedy


def test_a_newer_format_by_a_build_with_a_commit_names_the_build_and_a_version_to_install(
    tmp_path: Path,
) -> None:
    """A writer that named its build (`0.3.0+g<commit>`, issue 43): the cause names the whole
    build, the remedy's `>=` its version alone (a local label cannot stand in a `>=`)."""
    sample, reader = FORMATS["install-record"]
    tree = sample.model_dump(mode="json")
    build = "0.3.0.dev2+g" + "1a2b3c4d" * 5
    newer = {**tree, "schema_version": tree["schema_version"] + 1}
    newer["install"]["tool_version"] = build
    with pytest.raises(SetupError) as info:
        reader(tmp_path / "v", json.dumps(newer).encode())
    assert f"by automl-setup {build}, newer than this automl-setup" in info.value.cause
    assert "uv tool install 'automl-setup>=0.3.0.dev2'" in info.value.remedy


def test_torn_last_history_line_is_reported_not_dropped(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    line = HISTORY.model_dump_json().encode()
    store.history_path.write_bytes(line + b"\n" + line[:-5])
    entries, torn = store.read_history()
    assert entries == [HISTORY]
    assert torn == 2


# --------------------------------------------------------------------------------------------
# End to end: a damaged journal fed to the real `automl-setup repair`


@pytest.mark.slow
def test_repair_refuses_every_damaged_journal_and_changes_nothing(installed_env: Path) -> None:
    journal_path = installed_env / ".automl-setup" / "journal.json"
    sample = JOURNAL.model_dump(mode="json")
    damaged = {
        "missing fields (the old reader's defaults uninstalled everything)": json.dumps(
            {"txid": "0123456789ab", "pid": 1}
        ),
        "extra field": json.dumps({**sample, "unexpected_field": 1}),
        "wrong type": json.dumps({**sample, "backup": "all"}),
        "unknown version": json.dumps({**sample, "schema_version": "2"}),
        "truncated": json.dumps(sample)[:40],
        "path escape in txid": json.dumps({**sample, "txid": "../../.."}),
    }
    for label, text in damaged.items():
        journal_path.write_text(text)
        before = env_snapshot(installed_env)
        result = run_cli("repair", "--python", str(installed_env))
        assert result.code == 1, (label, result.output)
        assert "unexpected failure" not in result.output, label
        assert "the journal is damaged; nothing was changed" in result.stderr, label
        assert str(journal_path) in result.stderr, label
        assert "restored" not in result.output, label
        assert env_snapshot(installed_env) == before, label
        assert journal_path.read_text() == text, label
    journal_path.unlink()
    assert engine_marker(installed_env) == "main-1"
