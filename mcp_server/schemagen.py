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


def record_models() -> dict[str, type[BaseModel]]:
    """File name -> model, for every record automl-setup writes or returns."""
    from mcp_server.bundle.init import InitResult
    from mcp_server.bundle.ownership import InitRecord
    from mcp_server.experiments.attempts import AttemptEntry
    from mcp_server.experiments.binding import Binding
    from mcp_server.experiments.registry import RegisteredExperiment
    from mcp_server.operations import ProvenanceReport
    from mcp_server.report.build import ReportResult
    from mcp_server.skills.report import SkillsReport
    from mcp_server.slurm.receipts import Receipt
    from mcp_server.slurm.registry import JobRegistry
    from mcp_server.slurm.watch import WatchMemory

    return {
        "install-record.schema.json": InstallRecord,
        "install-history-entry.schema.json": HistoryEntry,
        "install-journal.schema.json": Journal,
        # What `verify --json` prints: the environment report, plus binding and diagnosis.
        "verify-report.schema.json": ProvenanceReport,
        # What `report --json` prints (and report_experiment returns, less its message).
        "experiment-report.schema.json": ReportResult,
        "experiment-binding.schema.json": Binding,
        "experiment-attempt.schema.json": AttemptEntry,
        "environment-experiment-entry.schema.json": RegisteredExperiment,
        # `<store>/wheels/<sha256>/entry.json`: an engine's wheel or a closure member's.
        "wheel-store-entry.schema.json": WheelEntry,
        "slurm-receipt.schema.json": Receipt,
        "slurm-job-registry.schema.json": JobRegistry,
        "slurm-watch-memory.schema.json": WatchMemory,
        # `.automl-setup/init.json` in a user's project, and what `init --json` prints.
        "init-record.schema.json": InitRecord,
        "init-result.schema.json": InitResult,
        # What `skills check --format json` and `skills links --format json` print.
        "skills-report.schema.json": SkillsReport,
    }


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
