"""Files written by released versions of automl-setup (tests/fixtures/formats/release-N, each
taken from a real `automl-setup demo` run of that release: release-1 the first formats,
release-2 the record and binding of format 2, before the closure was recorded) are read by
today's readers, strictly: an experiment launched months ago must still show its status and
resume on its bound engine. A new field in a persisted model without a new format version
fails here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mcp_server.environment.identity import CLOSURE_NOT_RECORDED
from mcp_server.environment.records import RecordStore
from mcp_server.experiments.attempts import ATTEMPT_SCHEMA_VERSION, read_attempts
from mcp_server.experiments.binding import binding_notes, read_binding
from mcp_server.experiments.files import SIDECAR, ExperimentFiles
from mcp_server.experiments.registered import RegisteredExperiment, registered_experiments

FORMATS = Path(__file__).parents[1] / "fixtures" / "formats"
RELEASES = ["release-1", "release-2"]
EXPERIMENT = "demo-quadratic"


@pytest.fixture(params=RELEASES)
def release(request: pytest.FixtureRequest) -> Path:
    return FORMATS / str(request.param)


def _lines(release: Path, name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (release / name).read_text().splitlines()]


def test_an_engine_state_of_a_release_reads(tmp_path: Path, release: Path) -> None:
    RELEASE_1 = release
    state = tmp_path / ".automl-setup"
    (state / "experiments").mkdir(parents=True)
    shutil.copy(RELEASE_1 / "engine-record.json", state / "engine-record.json")
    shutil.copy(RELEASE_1 / "history.jsonl", state / "history.jsonl")
    shutil.copy(RELEASE_1 / "registered-experiment.json", state / "experiments" / "e.json")
    store = RecordStore(state)

    record = store.read_record()
    assert record is not None and record.origin == "source-build"
    old = json.loads((RELEASE_1 / "engine-record.json").read_text())
    assert record.source is not None and record.source.commit == old["source"]["commit"]
    assert record.identity_digest == old["identity_digest"]
    history, torn = store.read_history()
    assert torn is None
    lines = _lines(release, "history.jsonl")
    assert [e.commit for e in history] == [line["commit"] for line in lines]
    assert record.closure is None  # neither release recorded it: compared as it was
    (entry,) = registered_experiments(state)
    assert isinstance(entry, RegisteredExperiment) and entry.experiment_id == EXPERIMENT


def test_an_experiment_of_a_release_reads(tmp_path: Path, release: Path) -> None:
    RELEASE_1 = release
    files = ExperimentFiles(tmp_path, EXPERIMENT)
    (tmp_path / SIDECAR / EXPERIMENT).mkdir(parents=True)
    for name in ("binding.json", "attempts.jsonl"):
        shutil.copy(RELEASE_1 / name, files.dir / name)

    binding = read_binding(files)
    old = json.loads((RELEASE_1 / "binding.json").read_text())
    assert binding.engine.identity_digest == old["engine"]["identity_digest"]
    assert binding.schema_version == 3 and old["schema_version"] in (1, 2)
    if old["schema_version"] == 1:
        assert binding.engine.extras is None  # format 1 did not record them
    assert binding.engine.closure is None  # nor did 1 or 2 the closure
    assert binding_notes(binding) == [CLOSURE_NOT_RECORDED]
    attempts, torn = read_attempts(files)
    assert torn is None
    written = _lines(release, "attempts.jsonl")
    assert [(a.attempt, a.action, a.outcome) for a in attempts] == [
        (line["attempt"], line["action"], line["outcome"]) for line in written
    ]
    # Upgraded to today's format on reading; the file itself is never rewritten.
    assert {a.schema_version for a in attempts} == {ATTEMPT_SCHEMA_VERSION}
    if release.name == "release-1":  # the fields that came later are null in its lines
        assert all(a.job_id is None and a.process_start is None for a in attempts)
    assert (files.dir / "attempts.jsonl").read_bytes() == (
        RELEASE_1 / "attempts.jsonl"
    ).read_bytes()


def test_the_init_record_of_0_1_0_reads_and_is_carried_forward(tmp_path: Path) -> None:
    """`.automl-setup/init.json` as 0.1.0's own `init` wrote it (format 1, one digest per entry,
    release-1/init-project), read strictly and carried forward to today's format: each entry's
    keys are those 0.1.0 wrote, by digest."""
    from mcp_server.bundle.members import wanted_view
    from mcp_server.bundle.ownership import RECORD_PATH, InitRecordV1, read_record
    from mcp_server.bundle.targets import read_owned

    project = tmp_path / "proj"
    shutil.copytree(FORMATS / "release-1" / "init-project", project)
    old = read_record(project)
    assert isinstance(old, InitRecordV1) and old.tool_version == "0.1.0"
    record, released = read_owned(project)
    assert released and record is not None and record.schema_version == 2
    assert [i.path for i in record.items] == [i.path for i in old.items]
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["automl-setup"]
    (claude,) = [i for i in record.items if i.path == ".mcp.json"]
    wrote = {k: v for k, v in entry.items() if k != "env"}  # 0.1.0's empty env owns no key
    assert {tuple(k.key): k.sha256 for k in claude.keys} == wanted_view(wrote)
    assert all(i.keys == [] for i in record.items if not i.key)  # whole files
    assert json.loads((project / RECORD_PATH).read_text())["schema_version"] == 1  # unwritten
