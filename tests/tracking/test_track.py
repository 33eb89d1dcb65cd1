"""`automl-setup track` against a real MLflow tracking server (tests/support/tracking.py),
checked through MLflow's REST API as any other client sees it: the runs, their nesting, params,
metrics, times, the engine build on every run, the artifacts; a second sync writes nothing; new
trials arrive while the experiment runs; a stopped server, missing or wrong credentials, a
permission refused and someone else's MLflow experiment are refusals that change nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from support.browser import assert_not_blank, headless_chrome
from support.cli import CliResult, run_cli
from support.experiments import Experiment, Reaper, launch_detached, wait_for, write_manifest
from support.mcp import BIN, Wire, call_ok, serve
from support.refengine import holding
from support.tracking import ADMIN, MlflowServer, metrics, params, tags
from tracking.conftest import Engine

from mcp_server import __build__
from mcp_server.environment.identity import closure_digest
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.trials import read_trials
from mcp_server.faces.mcp.server import server as mcp_server
from mcp_server.fsutil import exclusive_holder
from mcp_server.tracking.sync import PAUSE_POINTS
from mcp_server.tracking.tags import milliseconds, trial_end
from mcp_server.values import ExperimentId


def track(experiment_id: str, workspace: Path, uri: str, *extra: str, **env: str) -> CliResult:
    return run_cli("track", "--experiment-id", experiment_id, "--workspace", str(workspace),
                   "--tracking-uri", uri, *extra, env=env)  # fmt: skip


def mlflow_runs(server: MlflowServer, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The MLflow experiment `name` and its runs, the experiment's run first."""
    found = server.api("GET", f"experiments/get-by-name?experiment_name={name}")["experiment"]
    runs = server.runs(found["experiment_id"])
    runs.sort(key=lambda r: (tags(r).get("automl.run") != "experiment", r["info"]["run_name"]))
    return found, runs


def snapshot(server: MlflowServer, name: str) -> list[str]:
    return sorted(json.dumps(run, sort_keys=True) for run in mlflow_runs(server, name)[1])


@pytest.mark.slow
def test_an_experiment_in_mlflow_with_its_build_and_a_second_sync_changes_nothing(
    mlflow_server: MlflowServer, engine: Engine
) -> None:
    workspace = engine.launch("tracked", trials=3)
    first = track("tracked", workspace, mlflow_server.url, "--json")
    assert first.code == 0, first.output
    result = json.loads(first.stdout)
    assert result["runs_created"] == 4 and result["trials"] == 3 and result["syncs"] == 1
    assert sorted(result["artifacts_uploaded"]) == ["binding.json", "pylock.toml", "report.html"]

    found, runs = mlflow_runs(mlflow_server, "tracked")
    assert {t["key"]: t["value"] for t in found["tags"]}["automl.managed_by"] == "automl-setup"
    parent, trial_runs = runs[0], runs[1:]
    files = ExperimentFiles(workspace, ExperimentId("tracked"))
    binding = read_binding(files)
    engine_build = binding.engine
    assert engine_build.source is not None
    build = {
        "automl.engine.distribution": engine_build.build.distribution,
        "automl.engine.version": engine_build.build.version,
        "automl.engine.commit": engine_build.source.commit,
        "automl.engine.ref": engine_build.source.requested_ref,
        "automl.engine.wheel_sha256": engine_build.build.wheel_sha256,
        "automl.engine.identity_digest": engine_build.identity_digest,
        "automl.engine.closure_digest": closure_digest(engine_build.closure),
        "automl.setup_version": __build__,
        "automl.experiment_id": "tracked",
        "automl.workspace": str(workspace),
    }
    for run in runs:  # the build on every run: a tag filter finds them all
        assert build.items() <= tags(run).items(), run
    commit = engine_build.source.commit
    query = {"experiment_ids": [found["experiment_id"]],
             "filter": f"tags.`automl.engine.commit` = '{commit}'"}  # fmt: skip
    assert len(mlflow_server.api("POST", "runs/search", query)["runs"]) == 4

    assert parent["info"]["run_name"] == "tracked" and parent["info"]["status"] == "FINISHED"
    assert parent["info"]["start_time"] == milliseconds(binding.time)
    trials = read_trials(files)
    objective = trials.objective.metric if trials.objective else ""
    history = mlflow_server.api(
        "GET", f"metrics/get-history?run_id={parent['info']['run_id']}&metric_key={objective}"
    )["metrics"]
    assert sorted(m["step"] for m in history) == [0, 1, 2]  # the objective per trial, once
    for run, trial in zip(trial_runs, trials.trials, strict=True):
        assert run["info"]["run_name"] == f"trial-{trial.index:05d}"
        assert tags(run)["mlflow.parentRunId"] == parent["info"]["run_id"]
        assert tags(run)["automl.trial_index"] == str(trial.index)
        assert params(run) == {k: str(v) for k, v in trial.params.items()}
        assert metrics(run) == {k: (v, trial.index) for k, v in trial.metrics.items()}
        assert run["info"]["status"] == "FINISHED"
        assert run["info"]["start_time"] == milliseconds(trial.started)
        assert run["info"]["end_time"] == trial_end(trial)

    assert mlflow_server.artifact(parent, "binding.json") == files.binding.read_bytes()
    assert b"tracked" in mlflow_server.artifact(parent, "report.html")
    assert b"lock-version" in mlflow_server.artifact(parent, "pylock.toml")

    before = snapshot(mlflow_server, "tracked")
    again = track("tracked", workspace, mlflow_server.url, "--json")
    assert again.code == 0, again.output
    second = json.loads(again.stdout)
    assert second["unchanged"] is True and second["runs_created"] == 0
    assert second["runs_updated"] == 0 and second["artifacts_uploaded"] == []
    assert second["parent_run_id"] == result["parent_run_id"]
    assert snapshot(mlflow_server, "tracked") == before
    text = track("tracked", workspace, mlflow_server.url).stdout
    assert text.startswith("tracked tracked: nothing new to write\n"), text


@pytest.mark.slow
def test_tracked_while_it_runs_the_new_trials_arrive(
    mlflow_server: MlflowServer, engine: Engine, tmp_path: Path, reaper: Reaper
) -> None:
    hold = tmp_path / "hold"
    manifest = write_manifest(tmp_path / "m.yaml", experiment_id="running", max_trials=3,
                              sleep=0.0, hold=hold)  # fmt: skip
    exp = Experiment(manifest, tmp_path / "ws", engine.env, experiment_id="running", hold=hold)
    follow = [str(BIN / "automl-setup"), "track", "--experiment-id", "running", "--workspace",
              str(exp.workspace), "--tracking-uri", mlflow_server.url, "--follow",
              "--interval", "1", "--json"]  # fmt: skip
    with holding(hold, 1):
        pid = launch_detached(exp, reaper)
        wait_for("the first trial", lambda: exp.trials_done() >= 1)
        first = track("running", exp.workspace, mlflow_server.url, "--json")
        assert first.code == 0, first.output
        assert json.loads(first.stdout)["state"] == "running"
        assert "running is still running: track it again" in json.loads(first.stdout)["notes"][0]
        _found, runs = mlflow_runs(mlflow_server, "running")
        assert runs[0]["info"]["status"] == "RUNNING"
        assert runs[1]["info"]["status"] == "FINISHED"
        follower = subprocess.Popen(follow, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)  # fmt: skip
    assert reaper.reap(pid) == 0
    out, err = follower.communicate(timeout=180)
    assert follower.returncode == 0, err
    followed = json.loads(out)
    assert followed["state"] == "completed" and followed["syncs"] >= 1, followed
    _found, runs = mlflow_runs(mlflow_server, "running")
    indexes = [tags(run)["automl.trial_index"] for run in runs[1:]]
    assert indexes == ["0", "1", "2"]  # each trial once, none duplicated by the two syncs
    assert all(run["info"]["status"] == "FINISHED" for run in runs)


@pytest.mark.slow
def test_a_stopped_server_is_a_clear_refusal_and_the_next_sync_completes(
    engine: Engine, tmp_path: Path
) -> None:
    server = MlflowServer(tmp_path / "mlflow")
    server.start()
    try:
        workspace = engine.launch("restart", trials=2)
        server.stop()
        started = time.monotonic()
        refused = track("restart", workspace, server.url)
        assert refused.code == 1, refused.output
        assert time.monotonic() - started < 90  # bounded retries, never MLflow's minutes
        assert (
            f"\nerror: track: the tracking server at {server.url} does not answer: "
            in refused.stderr
        ), refused.stderr
        assert "remedy: start it or check the URI" in refused.stderr
        server.start()
        done = track("restart", workspace, server.url, "--json")
        assert done.code == 0, done.output
        assert json.loads(done.stdout)["runs_created"] == 3
    finally:
        server.stop()


@pytest.mark.slow
def test_basic_auth_with_and_without_credentials_and_none_written_anywhere(
    auth_server: MlflowServer, engine: Engine
) -> None:
    workspace = engine.launch("authed", trials=2)
    admin = {"MLFLOW_TRACKING_USERNAME": ADMIN[0], "MLFLOW_TRACKING_PASSWORD": ADMIN[1]}
    wrong = {"MLFLOW_TRACKING_USERNAME": ADMIN[0], "MLFLOW_TRACKING_PASSWORD": "Wrong-Pw-90210"}
    reader = ("reader", "Reader-Pw-44710")
    auth_server.api("POST", "users/create", {"username": reader[0], "password": reader[1]})
    seen: list[str] = []

    missing = track("authed", workspace, auth_server.url)
    assert missing.code == 1, missing.output
    assert "wants credentials, and none were given (401" in missing.stderr, missing.stderr
    assert "remedy: set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in missing.stderr
    refused = track("authed", workspace, auth_server.url, **wrong)
    assert refused.code == 1, refused.output
    assert "refused the credentials given (MLFLOW_TRACKING_USERNAME, MLFLOW_TRACKING_PASSWORD)" in (
        refused.stderr
    )
    done = track("authed", workspace, auth_server.url, "--json", **admin)
    assert done.code == 0, done.output
    assert json.loads(done.stdout)["runs_created"] == 3

    # An MLflow experiment of automl-setup's that this user may only read: a 403, not a write.
    guarded = engine.launch("guarded", trials=1)
    made = auth_server.api("POST", "experiments/create", {"name": "guarded"})
    auth_server.api("POST", "experiments/set-experiment-tag", {
        "experiment_id": made["experiment_id"], "key": "automl.managed_by",
        "value": "automl-setup"})  # fmt: skip
    as_reader = {"MLFLOW_TRACKING_USERNAME": reader[0], "MLFLOW_TRACKING_PASSWORD": reader[1]}
    denied = track("guarded", guarded, auth_server.url, **as_reader)
    assert denied.code == 1, denied.output
    assert "does not allow this user to do that (403" in denied.stderr, denied.stderr
    assert auth_server.runs(made["experiment_id"]) == []

    seen += [r.output for r in (missing, refused, done, denied)]
    _found, runs = mlflow_runs(auth_server, "authed")
    written = [json.dumps(runs)] + [
        p.read_text(errors="replace") for p in workspace.rglob("*") if p.is_file()
    ]
    for secret in (ADMIN[1], "Wrong-Pw-90210", reader[1]):
        assert not any(secret in text for text in seen + written), secret


@pytest.mark.slow
def test_an_mlflow_experiment_made_by_someone_else_is_never_written_into(
    mlflow_server: MlflowServer, engine: Engine
) -> None:
    workspace = engine.launch("foreign", trials=1)
    made = mlflow_server.api("POST", "experiments/create", {"name": "foreign"})
    refused = track("foreign", workspace, mlflow_server.url)
    assert refused.code == 1, refused.output
    assert (
        f"error: track: the MLflow experiment 'foreign' (id {made['experiment_id']}) was not "
        "created by automl-setup: nothing is written into it"
    ) in refused.stderr
    assert mlflow_server.runs(made["experiment_id"]) == []


@pytest.mark.slow
def test_the_mcp_tool_tracks_and_says_when_nothing_changed(
    mlflow_server: MlflowServer, engine: Engine
) -> None:
    workspace = engine.launch("via-mcp", trials=2)
    args = {"experiment_id": "via-mcp", "workspace": str(workspace),
            "tracking_uri": mlflow_server.url}  # fmt: skip

    async def twice() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(mcp_server) as client:
            first = await call_ok(client, "track_experiment", args)
            return first, await call_ok(client, "track_experiment", args)

    first, second = anyio.run(twice)
    assert first["runs_created"] == 3 and first["unchanged"] is False
    assert second["unchanged"] is True and second["parent_run_id"] == first["parent_run_id"]
    assert second["message"].startswith("tracked via-mcp: nothing new to write")


@pytest.mark.slow
def test_a_cancelled_mcp_call_stops_its_sync_and_the_next_call_completes_it(
    mlflow_server: MlflowServer, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real SDK client over stdio gives up on a call (its cancel scope, which sends
    notifications/cancelled) while the server's sync is held after its first trial run: the
    sync writes no further run and lets go of the experiment, and the next call completes it.
    The tool takes no follow: one call is one sync."""
    workspace = engine.launch("cancelled", trials=3)
    marker = tmp_path / "paused"
    for name, value in {"AUTOML_SETUP_PAUSE_AT": PAUSE_POINTS[0],
                        "AUTOML_SETUP_PAUSE_FILE": str(marker),
                        "AUTOML_SETUP_PAUSE_SECONDS": "5"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)  # the server's: serve passes this environment on
    args = {"experiment_id": "cancelled", "workspace": str(workspace),
            "tracking_uri": mlflow_server.url}  # fmt: skip
    lock = ExperimentFiles(workspace, ExperimentId("cancelled")).dir / "track.lock"

    async def cancel_then_again() -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        async with serve([str(BIN / "automl-setup-mcp")], Wire(tmp_path), "legacy") as client:
            schema = next(t for t in (await client.list_tools()).tools
                          if t.name == "track_experiment").input_schema  # fmt: skip
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "track_experiment", args)
                while not marker.exists():
                    await anyio.sleep(0.05)
                group.cancel_scope.cancel()  # well inside the pause: the flag is set by then
            while exclusive_holder(lock) is not None:  # the sync ends after its pause
                await anyio.sleep(0.05)
            after_cancel = snapshot(mlflow_server, "cancelled")
            return schema, after_cancel, await call_ok(client, "track_experiment", args)

    schema, after_cancel, again = anyio.run(cancel_then_again)
    runs = [json.loads(run) for run in after_cancel]
    # The experiment's run and the first trial's: no run for the trials after the cancel.
    assert sorted(tags(run)["automl.run"] for run in runs) == ["experiment", "trial"], runs
    assert again["runs_created"] == 2 and len(again["artifacts_uploaded"]) == 3, again
    _found, runs = mlflow_runs(mlflow_server, "cancelled")
    assert [tags(run).get("automl.trial_index") for run in runs] == [None, "0", "1", "2"]
    assert all(run["info"]["status"] == "FINISHED" for run in runs)
    assert "follow" not in schema["properties"] and "interval" not in schema["properties"]


def test_without_the_tracking_extra_track_says_how_to_add_it(tmp_path: Path) -> None:
    """The extra's absence, made by hiding MLflow from this one process (it is installed for
    the other tests): the refusal names the extra and how to add it, and reads nothing."""
    code = (
        "import sys; sys.modules['mlflow'] = None; sys.modules['mlflow.tracking'] = None; "
        "from mcp_server.faces.cli.main import main; sys.exit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "track", "--experiment-id", "x", "--workspace",
         str(tmp_path), "--tracking-uri", "http://127.0.0.1:9"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: track: MLflow's client is not installed"), done.stderr
    assert "add the `tracking` extra: pip install 'automl-setup[tracking]'" in done.stderr


def test_a_tracking_uri_carrying_credentials_is_refused_unprinted(tmp_path: Path) -> None:
    done = track("x", tmp_path, "http://admin:Hunter2-Secret@127.0.0.1:9")
    assert done.code == 2, done.output
    assert "carries credentials" in done.stderr and "Hunter2-Secret" not in done.output
    assert "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in done.stderr


@pytest.mark.slow
def test_the_trackers_experiment_page_shows_the_runs(
    mlflow_server: MlflowServer, engine: Engine, tmp_path: Path
) -> None:
    """MLflow's own web pages, in headless Chromium: the experiment's runs table lists its run
    (by the experiment's id) and the trials' nested in it; the run's page shows the engine
    commit among its tags."""
    from selenium.webdriver.common.by import By

    workspace = engine.launch("shown", trials=2)
    done = track("shown", workspace, mlflow_server.url, "--json")
    assert done.code == 0, done.output
    result = json.loads(done.stdout)
    commit = read_binding(ExperimentFiles(workspace, ExperimentId("shown"))).engine.source
    assert commit is not None
    with headless_chrome() as driver:
        driver.get(f"{mlflow_server.url}/#/experiments/{result['mlflow_experiment_id']}/runs")
        body = driver.find_element(By.TAG_NAME, "body")
        # The experiment's run and its two trials' (nested under it, folded).
        wait_for("the runs table", lambda: "3 matching runs" in body.text, timeout=60)
        assert "Training runs" in body.text and "\nshown\n" in body.text
        listing = driver.get_screenshot_as_png()
        driver.get(result["run_url"])
        body = driver.find_element(By.TAG_NAME, "body")
        wait_for("the run's tags", lambda: commit.commit in body.text, timeout=60)
        run_page = driver.get_screenshot_as_png()
    (tmp_path / "experiment.png").write_bytes(listing)
    (tmp_path / "run.png").write_bytes(run_page)
    assert_not_blank(listing)
    assert_not_blank(run_page)


@pytest.mark.slow
def test_a_sync_killed_halfway_leaves_nothing_half_claimed_and_the_next_completes(
    mlflow_server: MlflowServer, engine: Engine, tmp_path: Path
) -> None:
    workspace = engine.launch("halfway", trials=3)
    marker = tmp_path / "paused"
    argv = [str(BIN / "automl-setup"), "track", "--experiment-id", "halfway", "--workspace",
            str(workspace), "--tracking-uri", mlflow_server.url]  # fmt: skip
    pause = {"AUTOML_SETUP_PAUSE_AT": PAUSE_POINTS[0], "AUTOML_SETUP_PAUSE_FILE": str(marker)}
    proc = subprocess.Popen(argv, env={**os.environ, **pause}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for("the first trial's run", marker.exists, timeout=120)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    _found, runs = mlflow_runs(mlflow_server, "halfway")
    assert len(runs) == 2  # the experiment's and the first trial's, each found by its tags
    assert [tags(run)["automl.run"] for run in runs] == ["experiment", "trial"]

    done = track("halfway", workspace, mlflow_server.url, "--json")
    assert done.code == 0, done.output
    result = json.loads(done.stdout)
    assert result["runs_created"] == 2 and len(result["artifacts_uploaded"]) == 3
    _found, runs = mlflow_runs(mlflow_server, "halfway")
    assert [tags(run).get("automl.trial_index") for run in runs] == [None, "0", "1", "2"]
    assert all(run["info"]["status"] == "FINISHED" for run in runs)
    assert all(params(run) for run in runs[1:])  # the first trial's too, left bare by the kill
