"""The watcher's judgement of one tick, without a scheduler: the conflicts it detects at tick
time (a job owned by another uid than registered, an experiment bound to another identity
than registered, two live jobs for one experiment) are each reported once, then remembered.
The tick against a real scheduler is tests/slurm/test_slurm_watch.py."""

from __future__ import annotations

from typing import Any

from mcp_server.slurm.jobregistry import RegisteredJob
from mcp_server.slurm.scheduler import JobView
from mcp_server.slurm.watcher import WatchMemory, WatchRequest, _Experiment, _judge
from mcp_server.values import WorkspacePath

NOW = "2026-12-01T12:00:00+00:00"
BOUND = "a" * 64
REQUEST = WatchRequest(workspace=WorkspacePath("/ws"), once=True)


def registered(job_id: str, experiment_id: str = "exp", uid: int = 0) -> RegisteredJob:
    return RegisteredJob(
        job_id=job_id,
        experiment_id=experiment_id,
        uid=uid,
        user="root",
        identity_digest=BOUND,
        submitted=NOW,
        registered=NOW,
        how="submit",
    )


def running(job_id: str, uid: int = 0) -> JobView:
    return JobView(
        job_id=job_id,
        state="running",
        scheduler_state="RUNNING",
        generation=0,
        uid=uid,
        user="root",
        submitted=NOW,
        source="squeue",
    )


def kinds(drafts: list[dict[str, Any]]) -> list[str]:
    return [d["kind"] for d in drafts]


def two_ticks(
    jobs: list[RegisteredJob], views: dict[str, JobView], experiment: _Experiment
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The receipts of a first tick and of the next one, which remembers the first."""
    experiments = {job.experiment_id: experiment for job in jobs}
    first, memory = _judge(jobs, views, experiments, WatchMemory(), NOW, REQUEST)
    second, _ = _judge(jobs, views, experiments, memory, NOW, REQUEST)
    return first, second


def test_a_job_owned_by_another_uid_is_reported_once() -> None:
    first, second = two_ticks(
        [registered("7")], {"7": running("7", uid=1234)}, _Experiment(state="running")
    )
    assert kinds(first) == ["owner_conflict", "state_change"]
    assert first[0]["detail"] == "job 7: owned by uid 1234, registered for uid 0"
    assert second == []


def test_an_experiment_bound_to_another_identity_is_reported_once() -> None:
    other = "b" * 64
    first, second = two_ticks(
        [registered("7")], {"7": running("7")}, _Experiment(state="running", digest=other)
    )
    assert kinds(first) == ["identity_conflict", "state_change"]
    assert first[0]["detail"] == (
        f"job 7: registered for identity {BOUND[:16]}, but experiment exp is bound to {other[:16]}"
    )
    assert second == []


def test_the_same_owner_and_identity_are_no_conflict() -> None:
    first, second = two_ticks(
        [registered("7")], {"7": running("7")}, _Experiment(state="running", digest=BOUND)
    )
    assert kinds(first) == ["state_change"] and second == []


def test_two_live_jobs_of_one_experiment_are_one_conflict_reported_once() -> None:
    jobs = [registered("7"), registered("9")]
    views = {"7": running("7"), "9": running("9")}
    first, second = two_ticks(jobs, views, _Experiment(state="running", digest=BOUND))
    assert kinds(first) == ["state_change", "state_change", "live_conflict"]
    assert first[-1]["detail"] == "experiment exp has 2 live jobs: 7, 9"
    assert second == []
