"""One sync of an experiment into MLflow, idempotent: everything is found by its tags (never by
ids remembered locally), and only what differs is written, so a second sync writes nothing and
a sync cut off halfway is completed by the next one. A run is created with every tag that
finds it again in the same call, so no run is ever left half-claimed; an artifact's tag is set
only after its upload. A cancelled MCP call stops the sync before its next trial or its
artifacts (cancellation.py)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_server.cancellation import stop_point
from mcp_server.errors import SetupError
from mcp_server.experiments.trials import EngineTrials, Trial
from mcp_server.pausepoints import pause_at
from mcp_server.scratch import scratch_dir
from mcp_server.tracking.client import TRACK_AGAIN, page_all
from mcp_server.tracking.tags import (
    ARTIFACT_SHA,
    EXPERIMENT_STATUS,
    MANAGED_BY,
    PARENT,
    RUN_KIND,
    TRIAL_INDEX,
    TRIAL_STATUS,
    milliseconds,
    trial_end,
)

# name -> its bytes, made only when needed (None: it cannot be made; the caller says why)
Artifacts = dict[str, Callable[[], bytes | None]]
# Where a sync can be stopped by the crash tests (pausepoints.py): after its first trial run.
PAUSE_POINTS = ("track-trial-created",)


@dataclass
class Synced:
    mlflow_experiment_id: str = ""
    parent_run_id: str = ""
    created: int = 0
    updated: int = 0
    uploaded: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.uploaded)


def mlflow_experiment(client: Any, name: str) -> str:
    """The id of the MLflow experiment `name` automl-setup made, made now if there is none;
    one made by something else is never written into."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is None:
        try:
            return str(client.create_experiment(name, tags={MANAGED_BY: "automl-setup"}))
        except MlflowException:  # made meanwhile by another sync: judged below like any other
            found = client.get_experiment_by_name(name)
            if found is None:
                raise
    if found.tags.get(MANAGED_BY) != "automl-setup":
        raise SetupError(
            "track",
            f"the MLflow experiment {name!r} (id {found.experiment_id}) was not created by "
            "automl-setup: nothing is written into it",
            "rename or delete that MLflow experiment (its runs are someone else's), then track "
            "again",
        )
    if found.lifecycle_stage != "active":
        raise SetupError(
            "track",
            f"the MLflow experiment {name!r} (id {found.experiment_id}) is deleted",
            "restore it in MLflow (`mlflow experiments restore --experiment-id "
            f"{found.experiment_id}`), or purge it (`mlflow gc`), then track again",
        )
    return str(found.experiment_id)


def sync(
    client: Any,
    experiment_id: str,
    tags: dict[str, str],
    started: str,
    state: str,
    found: EngineTrials,
    artifacts: Artifacts,
) -> Synced:
    done = Synced(mlflow_experiment_id=mlflow_experiment(client, experiment_id))
    parent = _parent(client, done, experiment_id, tags, started)
    done.parent_run_id = parent.info.run_id
    children = page_all(
        client.search_runs,
        experiment_ids=[done.mlflow_experiment_id],
        filter_string=f"tags.`{PARENT}` = '{parent.info.run_id}'",
        max_results=1000,
    )
    by_index = {int(r.data.tags[TRIAL_INDEX]): r for r in children if TRIAL_INDEX in r.data.tags}
    metric = found.objective.metric if found.objective else None
    for trial in found.trials:
        stop_point("track", TRACK_AGAIN)
        run = by_index.get(trial.index)
        if run is None:
            run = client.create_run(
                done.mlflow_experiment_id,
                start_time=milliseconds(trial.started),
                tags={
                    **tags,
                    RUN_KIND: "trial",
                    TRIAL_INDEX: str(trial.index),
                    PARENT: parent.info.run_id,
                },
                run_name=f"trial-{trial.index:05d}",
            )
            done.created += 1
            pause_at("track-trial-created")
            run = client.get_run(run.info.run_id)
        done.updated += _trial(client, run, trial, tags)
    stop_point("track", TRACK_AGAIN)
    ends = [trial_end(t) for t in found.trials]
    end = max((e for e in ends if e is not None), default=None)
    done.updated += _objective_curve(client, parent, found.trials, metric)
    done.updated += _status(client, parent, EXPERIMENT_STATUS.get(state, "RUNNING"), end)
    done.updated += _tags(client, parent, {**tags, RUN_KIND: "experiment"})
    done.uploaded = _artifacts(client, client.get_run(parent.info.run_id), artifacts)
    return done


def _parent(
    client: Any, done: Synced, experiment_id: str, tags: dict[str, str], started: str
) -> Any:
    workspace = tags["automl.workspace"]
    runs = page_all(
        client.search_runs,
        experiment_ids=[done.mlflow_experiment_id],
        filter_string=f"tags.`{RUN_KIND}` = 'experiment'",
        max_results=1000,
    )
    mine = sorted(
        (r for r in runs if r.data.tags.get("automl.workspace") == workspace),
        key=lambda r: r.info.start_time,
    )
    if mine:
        return mine[0]
    run = client.create_run(
        done.mlflow_experiment_id,
        start_time=milliseconds(started),
        tags={**tags, RUN_KIND: "experiment"},
        run_name=experiment_id,
    )
    done.created += 1
    return client.get_run(run.info.run_id)


def _trial(client: Any, run: Any, trial: Trial, tags: dict[str, str]) -> int:
    """Write what differs of one trial's run: its tags, params, metrics (once each, at the
    trial's step) and status with end time. 1 when anything was written."""
    from mlflow.entities import Metric, Param, RunTag

    have = run.data
    params = [Param(k, str(v)) for k, v in trial.params.items() if k not in have.params]
    when = trial_end(trial) or int(time.time() * 1000)
    metrics = [
        Metric(k, v, when, trial.index) for k, v in trial.metrics.items() if k not in have.metrics
    ]
    wanted = {**tags, RUN_KIND: "trial", TRIAL_INDEX: str(trial.index)}
    new_tags = [RunTag(k, v) for k, v in wanted.items() if have.tags.get(k) != v]
    wrote = 0
    if params or metrics or new_tags:
        client.log_batch(run.info.run_id, metrics=metrics, params=params, tags=new_tags)
        wrote = 1
    return max(wrote, _status(client, run, TRIAL_STATUS[trial.state], trial_end(trial)))


def _status(client: Any, run: Any, status: str, end: int | None) -> int:
    info = run.info
    if status == "RUNNING":
        if info.status == "RUNNING":
            return 0
        client.update_run(info.run_id, status="RUNNING")
        return 1
    if info.status == status and (end is None or info.end_time == end):
        return 0
    client.set_terminated(info.run_id, status, end_time=end)
    return 1


def _tags(client: Any, run: Any, wanted: dict[str, str]) -> int:
    from mlflow.entities import RunTag

    new = [RunTag(k, v) for k, v in wanted.items() if run.data.tags.get(k) != v]
    if new:
        client.log_batch(run.info.run_id, tags=new)
    return int(bool(new))


def _objective_curve(client: Any, parent: Any, trials: list[Trial], metric: str | None) -> int:
    """The objective of each finished trial on the parent, at the trial's step: one curve."""
    if metric is None:
        return 0
    from mlflow.entities import Metric

    done = [t for t in trials if t.value is not None]
    if not done:
        return 0
    logged = {m.step for m in client.get_metric_history(parent.info.run_id, metric)}
    new = [
        Metric(metric, t.value, trial_end(t) or milliseconds(t.started), t.index)
        for t in done
        if t.index not in logged and t.value is not None
    ]
    if new:
        client.log_batch(parent.info.run_id, metrics=new)
    return int(bool(new))


def _artifacts(client: Any, parent: Any, artifacts: Artifacts) -> list[str]:
    """Upload each artifact whose bytes differ from what the parent's tag says was uploaded;
    the tag is set after the upload."""
    uploaded = []
    with scratch_dir("automl-setup-track-") as work:
        for name, make in artifacts.items():
            tag = ARTIFACT_SHA.format(name=name)
            have = parent.data.tags.get(tag)
            if have is not None and name == "pylock.toml":
                continue  # the bound closure's lock never changes: not resolved again
            data = make()
            if data is None:
                continue
            digest = hashlib.sha256(data).hexdigest()
            if have == digest:
                continue
            path = Path(work) / name
            path.write_bytes(data)
            client.log_artifact(parent.info.run_id, str(path))
            client.set_tag(parent.info.run_id, tag, digest)
            uploaded.append(name)
    return uploaded
