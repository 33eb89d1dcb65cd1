"""What a tracker is told of an experiment: the tags every run carries (the engine build it is
bound to, so a tag filter answers "which runs used this build?"), and the run statuses and
times the engine's ledger gives. Pure: no MLflow here."""

from __future__ import annotations

from datetime import datetime

from mcp_server import __build__
from mcp_server.environment.identity import closure_digest
from mcp_server.experiments.binding import Binding
from mcp_server.experiments.trials import Trial

# How the runs of automl-setup are told apart, in an MLflow experiment it made.
MANAGED_BY = "automl.managed_by"
RUN_KIND = "automl.run"  # "experiment" (the parent) or "trial"
TRIAL_INDEX = "automl.trial_index"
PARENT = "mlflow.parentRunId"
ARTIFACT_SHA = "automl.artifact.{name}.sha256"  # on the parent: what was uploaded

TRIAL_STATUS = {
    "running": "RUNNING",
    "succeeded": "FINISHED",
    "failed": "FAILED",
    "interrupted": "KILLED",
}
EXPERIMENT_STATUS = {
    "running": "RUNNING",
    "completed": "FINISHED",
    "failed": "FAILED",
    "cancelled": "KILLED",
    "interrupted": "KILLED",
}


def build_tags(binding: Binding, workspace: str) -> dict[str, str]:
    """The tags on every run of the experiment: the bound build and where it ran."""
    engine = binding.engine
    source = engine.source
    tags = {
        "automl.engine.distribution": engine.build.distribution,
        "automl.engine.version": engine.build.version,
        "automl.engine.commit": source.commit if source else "",
        "automl.engine.ref": source.requested_ref if source else "",
        "automl.engine.wheel_sha256": engine.build.wheel_sha256,
        "automl.engine.identity_digest": engine.identity_digest,
        "automl.engine.closure_digest": closure_digest(engine.closure) or "",
        "automl.setup_version": __build__,
        "automl.experiment_id": binding.experiment_id,
        "automl.workspace": workspace,
        MANAGED_BY: "automl-setup",
    }
    return {key: value for key, value in tags.items() if value}  # MLflow refuses empty values


def milliseconds(utc: str) -> int:
    """An ISO 8601 time of the ledger as MLflow's epoch milliseconds."""
    return int(datetime.fromisoformat(utc).timestamp() * 1000)


def trial_end(trial: Trial) -> int | None:
    """When the trial's last attempt ended, or None while it runs (or was cut off)."""
    if trial.duration_s is None or trial.state in ("running", "interrupted"):
        return None
    return milliseconds(trial.started) + int(trial.duration_s * 1000)
