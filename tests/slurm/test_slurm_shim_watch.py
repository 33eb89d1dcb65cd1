"""The SLURM watcher (`slurm watch --once`, `slurm watch register`) through the real command
line against a stand-in scheduler on PATH (tests/support/slurm_shim.py), so its ticks run
without a cluster: each change of a job reported once, a scheduler that cannot be asked, a
job the controller forgot, and registration with each of its refusals leaving the registry
as it was. The same on a real cluster: tests/slurm/test_slurm_watch.py.

Each test works in its own copy of one workspace whose experiment `exp` was submitted (and so
registered) as job 4242 through the shim.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.cli import CliResult, run_cli
from support.engines import install_main, new_source_repo
from support.slurm_shim import SlurmShim, sacct_argv, squeue_argv, submitted_workspace
from support.trees import tree_digest

from mcp_server.slurm.scheduler import NO_ACCOUNTING

JOB = "4242"
UNREACHABLE = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


@pytest.fixture(autouse=True)
def no_slurm_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's real cluster must not answer instead of the shim, nor change its answers.
    monkeypatch.delenv("SLURM_CONF", raising=False)


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    # This module's own install: a submit registers its experiment with the environment.
    root = tmp_path_factory.mktemp("slurm-shim-watch")
    env = install_main(root / "env", new_source_repo(root / "repo"))
    return submitted_workspace(root, env)


@pytest.fixture
def shim(tmp_path: Path, submitted: tuple[Path, str]) -> SlurmShim:
    return SlurmShim(tmp_path, submitted[1])


@pytest.fixture
def workspace(tmp_path: Path, submitted: tuple[Path, str]) -> Path:
    return Path(shutil.copytree(submitted[0], tmp_path / "ws", symlinks=True))


def watch(
    shim: SlurmShim, workspace: Path, *extra: str, missing: tuple[str, ...] = ()
) -> CliResult:
    return run_cli(
        "slurm", "watch", "--workspace", str(workspace), "--once", *extra,
        env=shim.env(missing=missing),
    )  # fmt: skip


def tick(shim: SlurmShim, workspace: Path, *extra: str, code: int = 0, **kw: Any) -> dict[str, Any]:
    result = watch(shim, workspace, "--json", *extra, **kw)
    assert result.code == code, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def register(shim: SlurmShim, workspace: Path, job: str, *extra: str) -> CliResult:
    return run_cli(
        "slurm", "watch", "register", f"--job-id={job}", "--experiment-id", "exp",
        "--workspace", str(workspace), *extra, env=shim.env(),
    )  # fmt: skip


def side(workspace: Path, name: str) -> Path:
    return workspace / ".automl-setup" / name


def stored(workspace: Path) -> list[dict[str, Any]]:
    path = side(workspace, "slurm-receipts.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def resume_command(workspace: Path) -> str:
    binding = json.loads(side(workspace, "exp/binding.json").read_text())
    return (
        f"automl-setup resume --experiment-id exp --workspace {workspace} --manifest "
        f"{binding['manifest_path']} --python {binding['engine']['environment_path']}"
    )


# --------------------------------------------------------------------------------------------
# Ticks


@pytest.mark.slow  # six ticks, each a CLI process: about 6 s
def test_ticks_follow_a_job_through_a_requeue_to_its_end_reporting_each_change_once(
    shim: SlurmShim, workspace: Path
) -> None:
    # The experiment itself never ran (a submitted job here does nothing), so its end is
    # "unfinished" whatever the job's end: the last tick gives the resume command.
    requeued = {"state": "PENDING", "reason": "BeginTime", "restarts": 1}
    failed = {"state": "FAILED", "reason": "NonZeroExitCode"}
    steps: list[tuple[dict[str, Any], str, int, list[tuple[str, str | None]]]] = [
        ({}, "pending", 0, [("state_change", None)]),
        ({}, "pending", 0, []),  # nothing happened: nothing reported, nothing written
        ({"state": "RUNNING", "reason": "None"}, "running", 0, [("state_change", "pending")]),
        (requeued, "requeued", 1, [("state_change", "running"), ("generation_boundary", None)]),
        ({"state": "RUNNING", "reason": "None"}, "running", 1, [("state_change", "requeued")]),
        (failed, "failed", 1, [("state_change", "running"), ("ended_unfinished", None)]),
    ]  # fmt: skip
    found = []
    for job, state, generation, expected in steps:
        shim.set_job(JOB, **job)
        before = tree_digest(workspace)
        result = tick(shim, workspace)
        assert expected or tree_digest(workspace) == before
        receipts = result["receipts"]
        assert [(r["kind"], r["previous_state"]) for r in receipts] == expected
        assert {r["state"] for r in receipts} <= {state}
        (row,) = result["jobs"]
        assert (row["job_id"], row["state"], row["generation"]) == (JOB, state, generation)
        found += receipts
    assert shim.calls() == [squeue_argv(JOB)] * len(steps)
    boundary = next(r for r in found if r["kind"] == "generation_boundary")
    assert (boundary["previous_generation"], boundary["generation"]) == (0, 1)
    assert "generation 0 -> 1 (allocation 2)" in boundary["detail"]
    ended = found[-1]
    assert (ended["command"], ended["job_id"]) == (resume_command(workspace), JOB)
    assert stored(workspace) == found  # numbered 1, 2, ... in the receipts ledger
    assert [r["receipt"] for r in found] == list(range(1, len(found) + 1))
    memory = json.loads(side(workspace, "slurm-watch.json").read_text())
    assert [(m["state"], m["generation"], m["ended_reported"]) for m in memory["jobs"]] == [
        ("failed", 1, True)
    ]


def test_a_long_wait_is_reported_once_with_its_reason(shim: SlurmShim, workspace: Path) -> None:
    shim.set_job(JOB, reason="Resources", submit="2026-01-01T00:00:00")
    first = tick(shim, workspace, "--pending-after", "60")
    assert [r["kind"] for r in first["receipts"]] == ["state_change", "pending_too_long"]
    waited = first["receipts"][1]
    assert (waited["reason"], waited["state"]) == ("Resources", "pending")
    assert waited["waited_seconds"] > 60 and "(Resources)" in waited["detail"]
    again = watch(shim, workspace, "--pending-after", "60")
    assert again.code == 0, again.output
    assert f"job {JOB} exp: pending (Resources), generation 0;" in again.stdout
    assert again.stdout.rstrip().endswith("nothing new")


def test_a_job_the_controller_forgot_ends_with_its_end_unknown_not_guessed(
    shim: SlurmShim, workspace: Path
) -> None:
    shim.set_job(JOB, state="COMPLETED", listed=False)  # no accounting storage: sacct refuses
    result = tick(shim, workspace)
    (row,) = result["jobs"]
    assert row["state"] == "unknown" and NO_ACCOUNTING in row["note"]
    kinds = [(r["kind"], r["state"]) for r in result["receipts"]]
    assert kinds == [("state_change", "unknown"), ("ended_unfinished", "unknown")]
    assert result["receipts"][1]["command"] == resume_command(workspace)
    assert shim.calls() == [squeue_argv(JOB), sacct_argv(JOB)]


@pytest.mark.parametrize(
    ("broken", "meanwhile", "said", "then"),
    [
        ("squeue", {"state": "RUNNING"}, f"squeue failed (exit 1): {UNREACHABLE}",
         [("state_change", "running")]),
        ("sacct", {"listed": False}, "sacct is not installed (not found on PATH)",
         [("state_change", "unknown"), ("ended_unfinished", "unknown")]),
    ],
)  # fmt: skip
def test_a_scheduler_that_cannot_be_asked_gives_one_receipt_and_keeps_the_memory(
    shim: SlurmShim,
    workspace: Path,
    broken: str,
    meanwhile: dict[str, Any],
    said: str,
    then: list[tuple[str, str]],
) -> None:
    tick(shim, workspace)  # the job seen pending, and remembered
    memory, registry = side(workspace, "slurm-watch.json"), side(workspace, "slurm-jobs.json")
    kept = memory.read_bytes(), registry.read_bytes()
    shim.set_job(JOB, **meanwhile)
    missing: tuple[str, ...] = ()
    if broken == "squeue":
        shim.fail("squeue", UNREACHABLE)
    else:
        missing = ("sacct",)
    failed = tick(shim, workspace, code=1, missing=missing)
    (error,) = failed["receipts"]
    assert (error["kind"], error["receipt"]) == ("scheduler_error", 2)
    assert error["detail"] == f"query scheduler: {said}"
    assert failed["jobs"][0]["state"] is None  # not asked is not a state
    assert (memory.read_bytes(), registry.read_bytes()) == kept
    shim.fail("squeue", None)
    # The next tick asks again and sees what the failed one could not.
    back = tick(shim, workspace)
    assert [(r["kind"], r["state"]) for r in back["receipts"]] == then
    assert back["receipts"][0]["previous_state"] == "pending"


def test_a_workspace_with_nothing_registered_asks_no_scheduler(
    shim: SlurmShim, tmp_path: Path
) -> None:
    result = watch(shim, tmp_path)
    assert result.code == 0, result.output
    assert (
        "0 job(s) registered (register one: `automl-setup slurm watch register`)" in result.stdout
    )
    assert "nothing new" in result.stdout and shim.calls() == []


def test_a_registry_entry_that_is_not_a_job_id_never_reaches_squeue(
    shim: SlurmShim, workspace: Path
) -> None:
    registry = side(workspace, "slurm-jobs.json")
    data = json.loads(registry.read_text())
    data["jobs"][0]["job_id"] = "--states=all"
    registry.write_text(json.dumps(data))
    before = tree_digest(workspace)
    result = watch(shim, workspace)
    assert result.code == 2 and "'--states=all' is not a SLURM job id" in result.stderr
    assert shim.calls() == [] and tree_digest(workspace) == before


# --------------------------------------------------------------------------------------------
# Registration


def test_an_existing_job_is_adopted_once_and_each_refusal_leaves_the_registry_as_it_was(
    shim: SlurmShim, workspace: Path
) -> None:
    shim.set_job(JOB, state="COMPLETED")  # the submitted job is over: exp may take another
    other = shim.add_job(state="RUNNING", reason="None")
    adopted = register(shim, workspace, other, "--json")
    assert adopted.code == 0, adopted.output
    out = json.loads(adopted.stdout)
    job = out["job"]
    assert (job["job_id"], job["experiment_id"], job["how"], job["uid"]) == (
        other, "exp", "adopt", os.getuid(),
    )  # fmt: skip
    assert out["already_registered"] is False and job["submitted"].endswith("+00:00")
    assert shim.calls() == [squeue_argv(JOB, other)]  # the job, and exp's other jobs
    registry = json.loads(side(workspace, "slurm-jobs.json").read_text())
    assert [(j["job_id"], j["how"]) for j in registry["jobs"]] == [
        (JOB, "submit"),
        (other, "adopt"),
    ]

    before = tree_digest(workspace)
    again = register(shim, workspace, other)
    assert (
        again.code == 0
        and f"already registered: job {other} controls experiment exp" in again.stdout
    )
    live = shim.add_job()
    foreign = shim.add_job(uid=65534, user="nobody")
    refusals = [
        (live, 1, f"exp already has live job {other} (running); refusing a second live job {live}"),
        (foreign, 1, f"job {foreign} belongs to uid 65534 (nobody)"),
        ("999999", 1, f"the scheduler does not know job 999999 ({NO_ACCOUNTING}"),
        ("--states=all", 2, "'--states=all' is not a SLURM job id"),
    ]  # fmt: skip
    for job_id, code, said in refusals:
        result = register(shim, workspace, job_id)
        assert result.code == code and said in result.stderr, result.output
    assert shim.calls()[1:] == [
        squeue_argv(JOB, other, live),
        squeue_argv(JOB, other, foreign),
        squeue_argv(JOB, other, "999999"),
        sacct_argv("999999"),  # the one squeue does not list
    ]  # nothing for the already registered job, nor for the id that is an option
    unknown = run_cli(
        "slurm", "watch", "register", "--job-id", live, "--experiment-id", "nosuch",
        "--workspace", str(workspace), env=shim.env(),
    )  # fmt: skip
    assert unknown.code == 1 and "nosuch" in unknown.stderr, unknown.output
    assert len(shim.calls()) == 5 and tree_digest(workspace) == before
