"""The committed JSON Schemas are what the pydantic models generate, and real records written by
real installs and experiments validate against them (and a damaged one does not)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.cli import run_cli
from support.experiments import Experiment, write_manifest

from mcp_server import schemagen

MODELS = schemagen.record_models()


def schema(name: str) -> dict[str, Any]:
    return dict(json.loads((schemagen.SCHEMA_DIR / name).read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_committed_schema_is_what_the_model_generates(name: str) -> None:
    path = schemagen.SCHEMA_DIR / name
    assert path.is_file(), f"{path} is missing: run `python -m mcp_server.schemagen`"
    assert path.read_text(encoding="utf-8") == schemagen.render(MODELS[name]), (
        f"{path} is stale: run `python -m mcp_server.schemagen` and commit the result"
    )


@pytest.mark.parametrize("name", sorted(MODELS))
def test_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    data = schema(name)
    assert data["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(data)
    assert data["additionalProperties"] is False  # the models forbid unknown keys


def validate(name: str, instance: Any) -> None:
    jsonschema.Draft202012Validator(schema(name)).validate(instance)


def invalid(name: str, instance: Any) -> bool:
    return not jsonschema.Draft202012Validator(schema(name)).is_valid(instance)


@pytest.mark.slow
def test_real_records_validate_against_their_schemas(tmp_path: Path, installed_env: Path) -> None:
    state = installed_env / ".automl-setup"
    record = json.loads((state / "engine-record.json").read_bytes())
    validate("install-record.schema.json", record)
    history = [json.loads(line) for line in (state / "history.jsonl").read_text().splitlines()]
    assert history
    for entry in history:
        validate("install-history-entry.schema.json", entry)
    verified = run_cli("verify", "--python", str(installed_env), "--json")
    assert verified.code == 0, verified.output
    validate("verify-report.schema.json", json.loads(verified.stdout))

    exp = Experiment(
        write_manifest(tmp_path / "m.yaml", max_trials=1, sleep=0.0), tmp_path / "ws", installed_env
    )
    assert exp.cli("launch").code == 0
    edited = write_manifest(tmp_path / "edited.yaml", max_trials=1, sleep=0.0, seed=99)
    assert exp.cli("resume", manifest=edited).code == 1  # a refusal with a field diff
    binding = json.loads(exp.binding.read_bytes())
    validate("experiment-binding.schema.json", binding)
    attempts = exp.attempts()
    assert [(a["action"], a["outcome"]) for a in attempts] == [
        ("launch", "accepted"),
        ("exit", "exited"),
        ("resume", "refused"),
    ]
    assert attempts[-1]["differences"]
    for entry in attempts:
        validate("experiment-attempt.schema.json", entry)

    # The schemas are not vacuous: damaged records fail them.
    assert invalid("install-record.schema.json", {**record, "extra": 1})
    assert invalid("install-record.schema.json", {k: v for k, v in record.items() if k != "source"})
    assert invalid("experiment-binding.schema.json", {**binding, "schema_version": 4})
    engine = {**binding["engine"], "source": {**binding["engine"]["source"], "commit": None}}
    assert invalid("experiment-binding.schema.json", {**binding, "profile": engine})
    assert invalid("experiment-attempt.schema.json", {**attempts[0], "outcome": "maybe"})
    diff = {**attempts[-1]["differences"][0], "note": "x"}
    assert invalid("experiment-attempt.schema.json", {**attempts[-1], "differences": [diff]})
    assert invalid("install-history-entry.schema.json", {**history[0], "event": "upgraded"})
