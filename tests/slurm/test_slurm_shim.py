"""`slurm submit`, `slurm status` and `slurm cancel` through the real command line against a
stand-in scheduler on PATH (tests/support/slurm_shim.py), so they run without a cluster: the
exact argv each SLURM command gets, what is printed and recorded, and for every refusal that
nothing changed. The same operations on a real cluster: tests/slurm/test_slurm_controller.py.

One install serves the module; most tests work in their own copy of one submitted workspace
(its job 4242 known to the test's own shim), so a submit is paid once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli import CliResult, run_cli
from support.engines import install_main, new_source_repo
from support.slurm_shim import SlurmShim, sacct_argv, squeue_argv, submit, submitted_workspace
from support.trees import env_snapshot, tree_digest

from mcp_server.environment.wheelstore import WheelStore
from mcp_server.slurm.scheduler import NO_ACCOUNTING
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION

JOB = "4242"  # the shim's first job id
UNREACHABLE = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
DENIED = f"scancel: error: Kill job error on job id {JOB}: Access/permission denied"


@pytest.fixture(autouse=True)
def no_slurm_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's real cluster must not answer instead of the shim, nor change its answers.
    monkeypatch.delenv("SLURM_CONF", raising=False)


@pytest.fixture(scope="module")
def engine_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's own install: a submit registers its experiment with the environment."""
    root = tmp_path_factory.mktemp("slurm-shim-env")
    return install_main(root / "env", new_source_repo(root / "repo"))


@dataclass(frozen=True)
class Submitted:
    workspace: Path
    state: str  # the shim's state right after the submit: job 4242, pending


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory, engine_env: Path) -> Submitted:
    return Submitted(*submitted_workspace(tmp_path_factory.mktemp("slurm-shim-ws"), engine_env))


@pytest.fixture
def shim(tmp_path: Path, submitted: Submitted) -> SlurmShim:
    return SlurmShim(tmp_path, submitted.state)


@pytest.fixture
def workspace(tmp_path: Path, submitted: Submitted) -> Path:
    return Path(shutil.copytree(submitted.workspace, tmp_path / "ws", symlinks=True))


def slurm(shim: SlurmShim, *args: str, missing: tuple[str, ...] = ()) -> CliResult:
    return run_cli("slurm", *args, env=shim.env(missing=missing))


def of(workspace: Path) -> list[str]:
    return ["--experiment-id", "exp", "--workspace", str(workspace)]


def attempts(workspace: Path) -> list[dict[str, Any]]:
    path = workspace / ".automl-setup" / "exp" / "attempts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


# --------------------------------------------------------------------------------------------
# submit


def test_submit_sends_one_sbatch_whose_user_values_never_become_options(
    engine_env: Path, tmp_path: Path
) -> None:
    shim = SlurmShim(tmp_path)
    shim.cluster("automl-test")  # "4242;automl-test": the id is the part before the ';'
    # A workspace named like an option, and an sbatch-arg value that is one: each stays inside
    # one `--name=value` element, and the script (the one positional) is an absolute path.
    result = submit(
        shim, engine_env, tmp_path, "--workspace=-ws", "--time", "1:00:00", "--partition",
        "debug", "--sbatch-arg=--comment=--wrap=rm -rf /", "--max-allocations", "002", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.output
    out = json.loads(result.stdout)
    folder = tmp_path / "-ws" / ".automl-setup" / "exp"
    script = folder / "controller.sbatch"
    assert (out["job_id"], out["script_path"], out["notes"]) == (JOB, str(script), [])
    assert shim.calls() == [
        [
            "sbatch", "--parsable", "--requeue", "--signal=B:USR1@120", "--job-name=automl-exp",
            f"--chdir={folder}", f"--output={folder}/slurm-%j.out", "--open-mode=append",
            "--time=1:00:00", "--partition=debug", "--comment=--wrap=rm -rf /", str(script),
        ],
        squeue_argv(JOB),  # the registration for the watcher asks who owns the job
    ]  # fmt: skip
    assert shim.slurm_confs() == {None}
    job = shim.job(JOB)
    assert (job["script"], job["script_args"]) == (str(script), [])
    assert out["job_log"] == job["stdout"]  # where SLURM writes the job's output
    sha = hashlib.sha256(script.read_bytes()).hexdigest()
    (entry,) = attempts(tmp_path / "-ws")
    assert (entry["action"], entry["outcome"], entry["job_id"]) == ("submit", "accepted", JOB)
    assert (entry["template_sha256"], out["template_sha256"]) == (sha, sha)
    assert (entry["log"], entry["reason"]) == (out["job_log"], "max allocations 002")
    registry = json.loads((folder.parent / "slurm-jobs.json").read_text())
    (registered,) = registry["jobs"]
    assert (registered["job_id"], registered["experiment_id"], registered["how"]) == (
        JOB, "exp", "submit",
    )  # fmt: skip
    assert (registered["uid"], registered["identity_digest"]) == (
        os.getuid(), out["identity_digest"],
    )  # fmt: skip


@pytest.mark.parametrize("name", ["sweep-%x", "run-%4j-%%-%u", "100%"])
def test_the_recorded_job_log_is_where_slurm_writes_it_whatever_the_workspace_is_named(
    engine_env: Path, tmp_path: Path, name: str
) -> None:
    # '%' is sbatch's filename pattern syntax: the folder goes to sbatch escaped ('%%').
    shim = SlurmShim(tmp_path)
    result = submit(shim, engine_env, tmp_path, "--workspace", str(tmp_path / name), "--json")
    assert result.code == 0, result.output
    out = json.loads(result.stdout)
    folder = tmp_path / name / ".automl-setup" / "exp"
    assert out["job_log"] == shim.job(JOB)["stdout"] == str(folder / f"slurm-{JOB}.out")
    assert f"--chdir={folder}" in shim.calls("sbatch")[0]  # a directory, not a pattern
    assert attempts(tmp_path / name)[0]["log"] == out["job_log"]


def test_a_workspace_with_a_backslash_is_refused_before_anything_is_bound(
    engine_env: Path, tmp_path: Path
) -> None:
    # A backslash anywhere turns sbatch's filename patterns off, and there is no escape for it.
    shim = SlurmShim(tmp_path)
    ws = tmp_path / "back\\slash"
    before = env_snapshot(engine_env)
    result = submit(shim, engine_env, tmp_path, "--workspace", str(ws))
    assert result.code == 2, result.output
    assert (
        "slurm submit: the workspace path " in result.stderr
        and "contains a backslash" in result.stderr
        and "remedy: give a --workspace DIR whose path has no backslash" in result.stderr
    ), result.output
    assert shim.calls() == [] and not ws.exists() and env_snapshot(engine_env) == before


def test_refused_submissions_leave_no_experiment_and_no_job(
    engine_env: Path, tmp_path: Path
) -> None:
    shim = SlurmShim(tmp_path)
    ws = tmp_path / "ws"
    before = env_snapshot(engine_env)
    for flag in ("--sbatch-arg=--no-requeue", "--partition=--wrap=id", "--time=1:00 --x"):
        invalid = submit(shim, engine_env, tmp_path, "--workspace", str(ws), flag)
        assert invalid.code == 2 and flag.split("=")[0] in invalid.stderr, invalid.output
    assert shim.calls() == []  # refused before sbatch was asked
    shim.fail("sbatch", "sbatch: error: invalid partition specified: nosuch")
    refused = submit(shim, engine_env, tmp_path, "--workspace", str(ws), "--partition", "nosuch")
    assert refused.code == 1, refused.output
    assert (
        "sbatch refused the controller job (exit 1): sbatch: error: invalid partition "
        "specified: nosuch" in refused.stderr
    )
    assert [c[0] for c in shim.calls()] == ["sbatch"]
    assert tree_digest(ws) == {} and env_snapshot(engine_env) == before


def test_a_job_the_watcher_could_not_register_is_kept_with_a_note(
    engine_env: Path, tmp_path: Path
) -> None:
    shim = SlurmShim(tmp_path)
    shim.fail("squeue", UNREACHABLE)
    ws = tmp_path / "ws"
    result = submit(shim, engine_env, tmp_path, "--workspace", str(ws))
    assert result.code == 0, result.output  # the job exists: a refusal would lose it
    assert f"submitted experiment exp as SLURM job {JOB} (at most 3 allocations)" in result.stdout
    cause = "note: not registered for the watcher: query scheduler: squeue failed (exit 1): "
    assert cause + UNREACHABLE in result.stdout
    assert [(e["action"], e["job_id"]) for e in attempts(ws)] == [("submit", JOB)]
    assert not (ws / ".automl-setup" / "slurm-jobs.json").exists()


def test_the_note_of_an_unregistered_job_says_how_to_register_it(
    engine_env: Path, tmp_path: Path
) -> None:
    shim = SlurmShim(tmp_path)
    shim.fail("squeue", UNREACHABLE)
    result = submit(shim, engine_env, tmp_path, "--workspace", str(tmp_path / "ws"), "--json")
    assert result.code == 0, result.output
    (note,) = json.loads(result.stdout)["notes"]
    register = f"automl-setup slurm watch register --job-id {JOB} --experiment-id exp"
    assert f"{register} --workspace {tmp_path / 'ws'}" in note and "asks again" not in note


@pytest.mark.slow  # a second install: the first one's wheel, as a reviewed wheel
def test_an_experiment_bound_to_a_reviewed_wheel_is_submitted_without_a_commit(
    engine_env: Path, wheel_store: Path, tmp_path: Path
) -> None:
    """A reviewed wheel has no source commit: the submit says so, where it used to fail
    reading the commit of a source the binding does not have."""
    record = json.loads((engine_env / ".automl-setup" / "engine-record.json").read_text())
    sha = record["build"]["wheel_sha256"]
    stored = WheelStore(wheel_store).find(sha)
    assert stored is not None
    wheel = Path(shutil.copy(stored.path, tmp_path))
    reviewed = tmp_path / "reviewed"
    where = ["--python", str(reviewed), "--create-env", "--distribution", REFERENCE_DISTRIBUTION]
    installed = run_cli("install", "--wheel", str(wheel), "--sha256", sha, *where)
    assert installed.code == 0, installed.output

    shim = SlurmShim(tmp_path)
    result = submit(shim, reviewed, tmp_path, "--workspace", str(tmp_path / "ws"), "--json")
    assert result.code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["job_id"], out["engine_commit"]) == (JOB, None)
    text = submit(SlurmShim(tmp_path / "again"), reviewed, tmp_path, "--workspace",
                  str(tmp_path / "ws2"))  # fmt: skip
    assert text.code == 0, text.output
    assert "  commit:   none (a reviewed wheel)\n" in text.stdout


# --------------------------------------------------------------------------------------------
# status


@pytest.mark.parametrize(
    ("job", "state", "reason", "generation"),
    [
        ({"state": "PENDING", "reason": "Resources"}, "pending", "Resources", 0),
        ({"state": "RUNNING", "reason": "None"}, "running", None, 0),
        ({"state": "PENDING", "reason": "BeginTime", "restarts": 1}, "requeued", "BeginTime", 1),
        ({"state": "COMPLETED", "reason": "None", "restarts": 2}, "completed", None, 2),
        ({"state": "FAILED", "reason": "NonZeroExitCode"}, "failed", None, 0),
    ],
)
def test_status_reports_the_scheduler_state_in_the_fixed_vocabulary(
    shim: SlurmShim,
    workspace: Path,
    job: dict[str, Any],
    state: str,
    reason: str | None,
    generation: int,
) -> None:
    shim.set_job(JOB, **job)
    before = tree_digest(workspace)
    result = slurm(shim, "status", *of(workspace), "--json")
    assert result.code == 0, result.output
    out = json.loads(result.stdout)
    view = out["scheduler"]
    assert (view["state"], view["scheduler_state"], view["reason"]) == (state, job["state"], reason)
    assert (out["generation"], view["source"], out["job_id"]) == (generation, "squeue", JOB)
    assert out["last_attempt"]["action"] == "submit"
    assert shim.calls() == [squeue_argv(JOB)]  # squeue knew it: sacct is not asked
    assert tree_digest(workspace) == before  # a status writes nothing


@pytest.mark.parametrize(
    ("accounting", "sacct", "line", "note"),
    [
        (False, None, "unknown", f"{NO_ACCOUNTING} (sacct: accounting storage is disabled)"),
        (True, "CANCELLED by 0", "cancelled", None),
        (True, "gone", "unknown", "neither squeue nor sacct knows this job"),
    ],
)  # fmt: skip
def test_status_of_a_job_the_controller_forgot_asks_sacct_and_never_guesses(
    shim: SlurmShim, workspace: Path, accounting: bool, sacct: str | None, line: str,
    note: str | None,
) -> None:  # fmt: skip
    shim.accounting(accounting)
    shim.set_job(JOB, state="COMPLETED", listed=False, sacct_state=sacct)
    if sacct == "gone":
        shim.remove_job(JOB)
    result = slurm(shim, "status", *of(workspace))
    assert result.code == 0, result.output
    assert f"experiment exp: SLURM job {JOB} {line}\n" in result.stdout
    assert "generation: unknown" in result.stdout  # sacct has no restart count, nor the ledger
    assert note is None or f"note: {note}" in result.stdout
    assert shim.calls() == [squeue_argv(JOB), sacct_argv(JOB)]


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ("squeue", f"squeue failed (exit 1): {UNREACHABLE}"),
        ("no squeue", "squeue is not installed (not found on PATH)"),
        ("no sacct", "sacct is not installed (not found on PATH)"),
    ],
)
def test_a_scheduler_that_cannot_be_asked_is_an_error_never_a_state(
    shim: SlurmShim, workspace: Path, broken: str, said: str
) -> None:
    missing: tuple[str, ...] = ()
    if broken == "squeue":
        shim.fail("squeue", UNREACHABLE)
    else:
        missing = (broken.split()[1],)
        shim.set_job(JOB, listed=False)  # so that sacct is asked
    before = tree_digest(workspace)
    result = slurm(shim, "status", *of(workspace), missing=missing)
    assert result.code == 1, result.output
    assert f"query scheduler: {said}" in result.stderr and "scontrol ping" in result.stderr
    assert tree_digest(workspace) == before


# --------------------------------------------------------------------------------------------
# cancel


def test_cancel_without_approval_asks_no_scheduler_and_changes_nothing(
    shim: SlurmShim, workspace: Path
) -> None:
    before, state = tree_digest(workspace), shim.state()
    result = slurm(shim, "cancel", *of(workspace))
    assert (
        result.code == 2
        and f"cancelling job {JOB} of experiment exp needs the user's yes" in result.stderr
    )
    # Approved, but for no submitted experiment: refused before the scheduler is asked.
    where = ["--workspace", str(workspace), "--approve"]
    unknown = slurm(shim, "cancel", "--experiment-id", "nosuch", *where)
    assert unknown.code == 1 and "nosuch" in unknown.stderr, unknown.output
    option = slurm(shim, "cancel", "--experiment-id=--jobs=1", *where)
    assert option.code == 2 and "is not a valid experiment id" in option.stderr, option.output
    assert shim.calls() == [] and shim.state() == state and tree_digest(workspace) == before


@pytest.mark.parametrize(
    ("job", "state"),
    [
        ({"state": "PENDING", "reason": "Priority"}, "pending"),
        ({"state": "RUNNING", "reason": "None"}, "running"),
        ({"state": "PENDING", "reason": "BeginTime", "restarts": 1}, "requeued"),
    ],
)
def test_an_approved_cancel_ends_a_live_job_and_keeps_the_experiment_resumable(
    shim: SlurmShim, workspace: Path, engine_env: Path, job: dict[str, Any], state: str
) -> None:
    shim.set_job(JOB, **job)
    result = slurm(shim, "cancel", *of(workspace), "--approve", "--json")
    assert result.code == 0, result.output
    out = json.loads(result.stdout)
    assert out["done"] == f"cancelled job {JOB} ({state}); the engine saves its state on SIGTERM"
    binding = json.loads((workspace / ".automl-setup" / "exp" / "binding.json").read_text())
    assert out["resume_command"] == (
        f"automl-setup resume --experiment-id exp --workspace {workspace} --manifest "
        f"{binding['manifest_path']} --python {engine_env}"
    )
    assert shim.calls() == [squeue_argv(JOB), ["scancel", JOB]]
    assert shim.job(JOB)["state"] == "CANCELLED"
    last = attempts(workspace)[-1]
    assert (last["action"], last["outcome"], last["job_id"], last["reason"]) == (
        "cancel", "accepted", JOB, state,
    )  # fmt: skip
    # Cancelled now, so there is nothing left to cancel: refused, and scancel is not run again.
    before = tree_digest(workspace)
    again = slurm(shim, "cancel", *of(workspace), "--approve")
    assert (
        again.code == 1
        and f"job {JOB} is not pending or running (cancelled); there is nothing to cancel"
        in again.stderr
    )
    assert shim.calls("scancel") == [["scancel", JOB]] and tree_digest(workspace) == before


@pytest.mark.parametrize(
    ("job", "broken", "said"),
    [
        ({"state": "COMPLETED"}, None, f"job {JOB} is not pending or running (completed)"),
        ({"state": "FAILED"}, None, f"job {JOB} is not pending or running (failed)"),
        ({"listed": False}, None, f"job {JOB} is not pending or running (unknown)"),
        ({"state": "RUNNING"}, "squeue", f"squeue failed (exit 1): {UNREACHABLE}"),
        ({"state": "RUNNING"}, "scancel", f"scancel {JOB} failed: {DENIED}"),
    ],
)  # fmt: skip
def test_a_cancel_that_cannot_be_done_records_nothing(
    shim: SlurmShim, workspace: Path, job: dict[str, Any], broken: str | None, said: str
) -> None:
    shim.set_job(JOB, **job)
    if broken is not None:
        shim.fail(broken, DENIED if broken == "scancel" else UNREACHABLE)
    before = tree_digest(workspace)
    result = slurm(shim, "cancel", *of(workspace), "--approve")
    assert result.code == 1 and said in result.stderr, result.output
    assert tree_digest(workspace) == before
    assert shim.calls("scancel") == ([["scancel", JOB]] if broken == "scancel" else [])
