"""`automl-setup track` (MCP `track_experiment`): an experiment written to an MLflow tracking
server, the engine build it is bound to on every run; with `follow` (the command line's alone:
an MCP call returns after one sync), synced again every `interval` seconds until the
experiment is finished (or no engine runs it any more)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.children.bound import Watch
from mcp_server.errors import SetupError
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.files import ExperimentFiles, require_experiment
from mcp_server.experiments.lock import bound_lock
from mcp_server.experiments.status import experiment_status
from mcp_server.experiments.trials import read_trials
from mcp_server.fsutil import exclusive_lock, read_file
from mcp_server.report.content import gather_report
from mcp_server.report.page import render_page
from mcp_server.report.plots import missing_plots_note
from mcp_server.requests import StatusQuery, TrackRequest
from mcp_server.tracking.client import mlflow_calls, resolve_uri, tracking_client
from mcp_server.tracking.sync import Artifacts, sync
from mcp_server.tracking.tags import build_tags

STEP = "track"
STEPS = (STEP,)
FINISHED = ("completed", "failed", "cancelled")
Progress = Callable[[str, str], None]


class TrackResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment tracked.")
    workspace: str = Field(description="Its workspace.")
    tracking_uri: str = Field(description="The tracking server written to (no credentials).")
    mlflow_experiment_id: str = Field(description="The MLflow experiment named after it.")
    parent_run_id: str = Field(description="The experiment's run; each trial's is nested in it.")
    run_url: str = Field(description="The experiment's run in the tracker's web page.")
    state: str = Field(description="The experiment's state at the last sync.")
    trials: int = Field(description="Trials synced, one nested run each.")
    runs_created: int = Field(description="Runs created, over every sync of this call.")
    runs_updated: int = Field(description="Runs that had anything written, over every sync.")
    artifacts_uploaded: list[str] = Field(description="Artifacts uploaded (changed or new).")
    syncs: int = Field(description="Syncs made (more than one with follow).")
    unchanged: bool = Field(description="True when the last sync found nothing to write.")
    notes: list[str] = Field(
        description="What the sync noticed and left alone.", default_factory=list
    )


def track_experiment(request: TrackRequest, progress: Progress | None = None) -> TrackResult:
    uri = resolve_uri(request.tracking_uri)
    client = tracking_client(uri)  # without the extra, nothing else is read
    files = ExperimentFiles(request.workspace.path, request.experiment_id)
    require_experiment(files, STEP, remedy="track takes an exact id; list them with")
    binding = read_binding(files)
    tags = build_tags(binding, str(files.workspace))
    query = StatusQuery(experiment_id=request.experiment_id, workspace=request.workspace)
    watch = Watch.of(request.stall_timeout, progress)  # the lock's resolution reaches an index

    def report() -> bytes:
        page = gather_report(request.experiment_id, request.workspace)
        return render_page(page, plots_note=missing_plots_note()).encode("utf-8")

    notes: list[str] = []

    @functools.cache  # resolved once a call: the bound closure's lock never changes
    def lock() -> bytes | None:
        try:
            return bound_lock(binding, watch)[0].encode("utf-8")
        except SetupError as exc:  # an old binding, a wheel gone from the store: said, not fatal
            notes.append(f"pylock.toml not uploaded: {exc.step}: {exc.cause}")
            return None

    artifacts: Artifacts = {
        "report.html": report,
        "binding.json": lambda: read_file(files.binding) or b"",
        "pylock.toml": lock,
    }
    created = updated = syncs = 0
    uploaded: list[str] = []
    holder = f"the tracking of experiment {request.experiment_id}"
    with exclusive_lock(files.dir / "track.lock", step=STEP, holder=holder):
        while True:
            status = experiment_status(query)
            found = read_trials(files)
            if progress:
                progress(STEP, f"syncing {len(found.trials)} trials to {uri}")
            with mlflow_calls(STEP, uri):
                done = sync(client, request.experiment_id, tags, binding.time, status.state,
                            found, artifacts)  # fmt: skip
            syncs += 1
            created, updated = created + done.created, updated + done.updated
            uploaded += [name for name in done.uploaded if name not in uploaded]
            if progress:
                progress(STEP, f"sync {syncs}: {done.created} runs created, {done.updated} "
                         f"updated, {len(done.uploaded)} artifacts uploaded")  # fmt: skip
            if status.state in FINISHED:
                break
            if not request.follow:
                if status.controller_running:
                    notes.append(
                        f"{request.experiment_id} is still running: track it again to sync the "
                        "trials it adds (each sync writes only what changed)"
                    )
                break
            if not status.controller_running:
                notes.append(
                    f"no engine runs {request.experiment_id} ({status.state}): follow stopped; "
                    "resume it, then track again"
                )
                break
            time.sleep(request.interval)
    return TrackResult(
        experiment_id=request.experiment_id,
        workspace=str(files.workspace),
        tracking_uri=str(uri),
        mlflow_experiment_id=done.mlflow_experiment_id,
        parent_run_id=done.parent_run_id,
        run_url=f"{uri}/#/experiments/{done.mlflow_experiment_id}/runs/{done.parent_run_id}",
        state=status.state,
        trials=len(found.trials),
        runs_created=created,
        runs_updated=updated,
        artifacts_uploaded=uploaded,
        syncs=syncs,
        unchanged=not done.changed,
        notes=notes,
    )
