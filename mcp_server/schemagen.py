"""JSON Schemas of the record formats, generated from the pydantic models (the single source).

`python -m mcp_server.schemagen` rewrites `mcp_server/schemas/*.schema.json`; a test fails when
a committed schema differs from what the models generate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from mcp_server.environment.records import HistoryEntry, InstallRecord, Journal
from mcp_server.environment.wheelstore import WheelEntry

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


def formats() -> dict[str, tuple[type[BaseModel], str]]:
    """File name -> (model, where the format lives), for every record automl-setup writes or
    prints (docs/reference/formats.md is generated from this)."""
    from mcp_server.bundle.init import InitResult
    from mcp_server.bundle.ownership import InitRecord
    from mcp_server.experiments.attempts import AttemptEntry
    from mcp_server.experiments.binding import Binding
    from mcp_server.experiments.registered import RegisteredExperiment
    from mcp_server.operations import ProvenanceReport
    from mcp_server.report.make import ReportResult
    from mcp_server.skills.report import SkillsReport
    from mcp_server.slurm.jobregistry import JobRegistry
    from mcp_server.slurm.receipts import Receipt
    from mcp_server.slurm.watcher import WatchMemory

    state = "`<environment>/.automl-setup/"
    experiment = "`<workspace>/.automl-setup/<experiment id>/"  # ExperimentFiles.dir
    return {
        "install-record.schema.json": (
            InstallRecord,
            f"{state}engine-record.json`: what is installed, exactly (one per environment).",
        ),
        "install-history-entry.schema.json": (
            HistoryEntry,
            f"{state}history.jsonl`: one line per install or rollback, appended.",
        ),
        "install-journal.schema.json": (
            Journal,
            f"{state}journal.json`: written before an install changes the environment, removed "
            "when it is recorded; `repair` rolls back from it.",
        ),
        "verify-report.schema.json": (
            ProvenanceReport,
            "What `verify --json` prints: the environment's report, the binding comparison and "
            "the diagnosis.",
        ),
        "experiment-report.schema.json": (
            ReportResult,
            "What `report --json` prints (and report_experiment returns, less its message).",
        ),
        "experiment-binding.schema.json": (
            Binding,
            f"{experiment}binding.json`: the exact build an experiment is bound to, written once.",
        ),
        "experiment-attempt.schema.json": (
            AttemptEntry,
            f"{experiment}attempts.jsonl`: one numbered line per launch, resume, engine exit, "
            "stop, SLURM submit and cancel, and per SLURM allocation (the gate's launch or "
            "resume, and the end of the allocation before), each with its outcome (accepted, "
            "refused, exited, stopped or signalled).",
        ),
        "environment-experiment-entry.schema.json": (
            RegisteredExperiment,
            f"{state}experiments/<id>--<key>.json`: an experiment bound to this environment, for "
            "the install guard.",
        ),
        "wheel-store-entry.schema.json": (
            WheelEntry,
            "`<store>/wheels/<sha256>/entry.json`: an engine's wheel or a closure member's.",
        ),
        "slurm-receipt.schema.json": (
            Receipt,
            "`<workspace>/.automl-setup/slurm-receipts.jsonl`: one line per thing a watch tick "
            "saw happen.",
        ),
        "slurm-job-registry.schema.json": (
            JobRegistry,
            "`<workspace>/.automl-setup/slurm-jobs.json`: the controller jobs the watcher ticks "
            "over.",
        ),
        "slurm-watch-memory.schema.json": (
            WatchMemory,
            "`<workspace>/.automl-setup/slurm-watch.json`: what the last tick saw of each job.",
        ),
        "init-record.schema.json": (
            InitRecord,
            "`.automl-setup/init.json` in a user's project: what `init` wrote, with hashes.",
        ),
        "init-result.schema.json": (InitResult, "What `init --json` prints."),
        "skills-report.schema.json": (
            SkillsReport,
            "What `skills check --format json` and `skills links --format json` print.",
        ),
    }


def record_models() -> dict[str, type[BaseModel]]:
    """File name -> model, for every record automl-setup writes or returns."""
    return {name: model for name, (model, _) in formats().items()}


def render(model: type[BaseModel]) -> str:
    schema = model.model_json_schema()
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_all(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in record_models().items():
        path = directory / name
        path.write_text(render(model), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all():
        print(path, file=sys.stderr)
