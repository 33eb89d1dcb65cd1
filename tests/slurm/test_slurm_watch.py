"""The SLURM controller watcher on the real test cluster (tests/slurm/cluster.sh): registration
and its conflicts, ticks across a requeue, waits, a cancelled job of an unfinished experiment,
the scheduler out of reach, unusable storage, two watchers at once, and sanitized receipts.

Jobs are plain `sbatch --parsable --wrap` jobs (most of them held, so they use no CPU of the
shared one-node cluster); the experiments are real ones launched from the session's shared
install: `exp-a` interrupted after a trial (unfinished), `exp-b` completed. Each test works in
its own copy of that workspace, so its registry, memory and receipts are its own.

The scheduler-down test does not stop the shared `slurmctld` (other tests use it at the same
time): it points this process at a copy of the cluster's slurm.conf whose `SlurmctldPort` is
closed, so for the watcher, and only for it, the controller is unreachable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from support.cli import run_cli
from support.engines import install_main, new_source_repo
from support.experiments import Experiment, interrupt, launch_detached, subreaper, write_manifest
from support.mcp import error_text
from support.slurm_cluster import SlurmCluster, start_requeued_job
from support.trees import tree_digest

from mcp_server.errors import SetupError
from mcp_server.faces.mcp.server import server
from mcp_server.slurm.jobregistry import register_job
from mcp_server.slurm.watcher import WatchRequest, WatchTick, tick

pytestmark = pytest.mark.slow
WAIT_S = 60.0
CLI = [sys.executable, "-m", "mcp_server.faces.cli"]


@pytest.fixture(scope="module")
def base_workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A workspace with exp-a (interrupted: unfinished) and exp-b (completed), bound to this
    module's own install (launching registers them with it: the session's shared install
    must stay as it was)."""
    root = tmp_path_factory.mktemp("watch-base")
    env = install_main(root / "env", new_source_repo(root / "repo"))
    for reaper in subreaper():
        manifest = write_manifest(root / "a.yaml", experiment_id="exp-a", max_trials=20, sleep=0.3)
        unfinished = Experiment(manifest, root / "ws", env, "exp-a")
        interrupt(unfinished, reaper, launch_detached(unfinished, reaper))
        manifest = write_manifest(root / "b.yaml", experiment_id="exp-b", max_trials=1, sleep=0.0)
        launched = Experiment(manifest, root / "ws", env, "exp-b").cli("launch")
        assert launched.code == 0, launched.output
        yield root / "ws"


@pytest.fixture
def workspace(base_workspace: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(base_workspace, tmp_path / "ws", symlinks=True))


class Jobs:
    """sbatch jobs of one test, cancelled at its end."""

    def __init__(self, cluster: SlurmCluster, where: Path) -> None:
        self.cluster, self.where = cluster, where
        self.ids: list[str] = []

    def submit(
        self, *args: str, env: dict[str, str] | None = None, command: str = "sleep 300"
    ) -> str:
        proc = subprocess.run(
            ["sbatch", "--parsable", f"--chdir={self.where}", "--output=/dev/null", *args,
             "--wrap", command],
            capture_output=True, text=True, check=True, env={**self.cluster.env(), **(env or {})},
        )  # fmt: skip
        job = proc.stdout.strip().split(";")[0]
        self.ids.append(job)
        return job

    def control(self, *args: str) -> None:
        subprocess.run(["scontrol", *args], check=True, capture_output=True, env=self.cluster.env())

    def cancel(self, *jobs: str) -> None:
        subprocess.run(["scancel", *jobs], check=True, capture_output=True, env=self.cluster.env())

    def state(self, job: str) -> str:
        proc = subprocess.run(
            ["squeue", "--noheader", "--states=all", f"--jobs={job}", "--Format=State:|"],
            capture_output=True, text=True, check=True, env=self.cluster.env(),
        )  # fmt: skip
        return proc.stdout.strip().rstrip("|")

    def wait(self, job: str, state: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while self.state(job) != state:
            assert time.monotonic() < deadline, f"job {job} never became {state}"
            time.sleep(0.2)


@pytest.fixture
def jobs(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[Jobs]:
    (tmp_path / "jobs").mkdir()
    made = Jobs(slurm_cluster, tmp_path / "jobs")
    yield made
    if made.ids:
        subprocess.run(["scancel", *made.ids], capture_output=True, env=slurm_cluster.env())


def once(workspace: Path, **fields: Any) -> WatchTick:
    return tick(WatchRequest(workspace=str(workspace), once=True, **fields))


def receipts(workspace: Path) -> list[dict[str, Any]]:
    path = workspace / ".automl-setup" / "slurm-receipts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def kinds(found: list[Any]) -> list[tuple[str, str | None]]:
    return [(r["kind"], r["job_id"]) if isinstance(r, dict) else (r.kind, r.job_id) for r in found]


def refused(call: Callable[[], object]) -> SetupError:
    with pytest.raises(SetupError) as caught:
        call()
    return caught.value


# --------------------------------------------------------------------------------------------
# Registration


def test_registration_and_its_conflicts(workspace: Path, jobs: Jobs) -> None:
    first, second = jobs.submit("--hold"), jobs.submit("--hold")
    done = register_job(workspace, first, "exp-a", how="adopt")
    assert (done.job.job_id, done.job.uid, done.job.how, done.already_registered) == (
        first, os.getuid(), "adopt", False,
    )  # fmt: skip
    binding = json.loads((workspace / ".automl-setup/exp-a/binding.json").read_bytes())
    assert done.job.identity_digest == binding["engine"]["identity_digest"]
    assert register_job(workspace, first, "exp-a", how="adopt").already_registered
    before = tree_digest(workspace)

    other = run_cli(
        "slurm", "watch", "register", "--job-id", first, "--experiment-id", "exp-b",
        "--workspace", str(workspace),
    )  # fmt: skip
    assert other.code == 1, other.output
    assert f"job {first} is already registered for experiment exp-a" in other.stderr
    assert "refusing it for experiment exp-b" in other.stderr and "remedy:" in other.stderr

    async def tool() -> str:
        async with Client(server) as client:
            args = {"job_id": first, "experiment_id": "exp-b", "workspace": str(workspace)}
            return error_text(
                await client.call_tool("register_slurm_watch", args), "register_slurm_watch"
            )

    assert other.stderr.removeprefix("error: ").strip() == anyio.run(tool).strip()
    twice = refused(lambda: register_job(workspace, second, "exp-a", how="adopt"))
    assert f"experiment exp-a already has live job {first} (pending)" in twice.cause
    assert f"second live job {second} (pending)" in twice.cause
    foreign = jobs.submit("--hold", "--uid=65534")
    stranger = refused(lambda: register_job(workspace, foreign, "exp-b", how="adopt"))
    assert f"job {foreign} belongs to uid 65534 (nobody)" in stranger.cause
    assert (
        "unknown" in refused(lambda: register_job(workspace, "999999", "exp-b", how="adopt")).cause
    )
    assert tree_digest(workspace) == before


# --------------------------------------------------------------------------------------------
# Ticks


def test_a_tick_across_a_requeue_records_exactly_one_generation_boundary(
    workspace: Path, jobs: Jobs
) -> None:
    job = jobs.submit()
    register_job(workspace, job, "exp-a", how="adopt")
    jobs.wait(job, "RUNNING")
    assert kinds(once(workspace).receipts) == [("state_change", job)]
    jobs.control("requeue", job)
    # Until slurmd has ended the old allocation, squeue says COMPLETING (for us: running); a
    # requeued job then waits, PENDING on its begin time, until released below.
    jobs.wait(job, "PENDING")
    requeued = once(workspace)
    assert kinds(requeued.receipts) == [("state_change", job), ("generation_boundary", job)]
    boundary = requeued.receipts[1]
    assert (boundary.previous_generation, boundary.generation, boundary.state) == (0, 1, "requeued")
    (row,) = requeued.jobs
    assert (row.state, row.generation, row.experiment_state) == ("requeued", 1, "interrupted")
    assert row.trials_done is not None and row.trials_done >= 1  # the experiment's own view
    start_requeued_job(job, jobs.cluster.env())
    jobs.wait(job, "RUNNING")
    again = once(workspace)
    assert kinds(again.receipts) == [("state_change", job)]
    assert again.jobs[0].generation == 1
    assert once(workspace).receipts == []
    ledger = receipts(workspace)
    assert [r["kind"] for r in ledger].count("generation_boundary") == 1
    assert [r["receipt"] for r in ledger] == list(range(1, len(ledger) + 1))


def test_a_long_wait_is_reported_once_with_its_reason(workspace: Path, jobs: Jobs) -> None:
    job = jobs.submit("--hold")
    register_job(workspace, job, "exp-b", how="adopt")
    first = once(workspace, pending_after=3600)
    assert kinds(first.receipts) == [("state_change", job)]
    assert (first.jobs[0].state, first.jobs[0].reason) == ("pending", "JobHeldUser")
    late = once(workspace, pending_after=0)
    (waited,) = late.receipts
    assert (waited.kind, waited.reason, waited.state) == (
        "pending_too_long",
        "JobHeldUser",
        "pending",
    )
    assert waited.waited_seconds is not None and "JobHeldUser" in waited.detail
    assert once(workspace, pending_after=0).receipts == []


def test_a_job_cancelled_while_its_experiment_is_unfinished_gives_the_resume_command(
    workspace: Path, jobs: Jobs
) -> None:
    job = jobs.submit("--hold")
    register_job(workspace, job, "exp-a", how="adopt")
    once(workspace)
    jobs.cancel(job)
    jobs.wait(job, "CANCELLED")
    result = run_cli("slurm", "watch", "--workspace", str(workspace), "--once", "--json")
    assert result.code == 0, result.output
    found = json.loads(result.stdout)["receipts"]
    assert kinds(found) == [("state_change", job), ("ended_unfinished", job)]
    binding = json.loads((workspace / ".automl-setup/exp-a/binding.json").read_bytes())
    resume = (
        f"automl-setup resume --experiment-id exp-a --workspace {workspace} "
        f"--manifest {binding['manifest_path']} --python {binding['engine']['environment_path']}"
    )
    assert found[1]["command"] == resume and found[1]["experiment_state"] == "interrupted"
    text = run_cli("slurm", "watch", "--workspace", str(workspace), "--once")
    assert text.code == 0 and "nothing new" in text.stdout, text.output
    assert receipts(workspace)[-1]["command"] == resume
    assert [r["kind"] for r in receipts(workspace)].count("ended_unfinished") == 1


def test_an_unreachable_scheduler_gives_a_receipt_and_no_state_change(
    workspace: Path, jobs: Jobs, slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = jobs.submit("--hold")
    register_job(workspace, job, "exp-a", how="adopt")
    once(workspace)
    memory = workspace / ".automl-setup" / "slurm-watch.json"
    registry = workspace / ".automl-setup" / "slurm-jobs.json"
    kept = memory.read_bytes(), registry.read_bytes()
    down = workspace.parent / "down.conf"
    conf = slurm_cluster.conf.read_text().replace("SlurmctldPort=6817", "SlurmctldPort=6999")
    # A closed port: unreachable for this process only; a short timeout to say so at once.
    down.write_text(f"{conf}MessageTimeout=1\n")
    monkeypatch.setenv("SLURM_CONF", str(down))
    failed = once(workspace)
    (error,) = failed.receipts
    assert (error.kind, failed.exit_code, error.receipt) == ("scheduler_error", 1, 2)
    assert "Unable to contact slurm controller" in error.detail
    assert failed.jobs[0].state is None and failed.jobs[0].experiment_state == "interrupted"
    assert (memory.read_bytes(), registry.read_bytes()) == kept
    jobs.cancel(job)
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    jobs.wait(job, "CANCELLED")
    back = once(workspace)  # asks again, and sees what the failed tick could not
    assert kinds(back.receipts) == [("state_change", job), ("ended_unfinished", job)]


@pytest.fixture
def small_mount(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs (unmounted afterwards); skips where this process may not mount."""
    where = tmp_path / "mnt"
    where.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=True)


def test_unusable_registry_storage_refuses_writes_and_says_so(
    base_workspace: Path, small_mount: Path, jobs: Jobs
) -> None:
    workspace = Path(
        shutil.copytree(base_workspace, small_mount, symlinks=True, dirs_exist_ok=True)
    )
    job = jobs.submit("--hold")
    register_job(workspace, job, "exp-b", how="adopt")
    subprocess.run(["mount", "-o", "remount,ro", str(small_mount)], check=True)
    before = tree_digest(workspace)
    read_only = run_cli(
        "slurm", "watch", "register", "--job-id", jobs.submit("--hold"), "--experiment-id",
        "exp-a", "--workspace", str(workspace),
    )  # fmt: skip
    assert read_only.code == 1, read_only.output
    assert "is on a read-only file system" in read_only.stderr and "remedy:" in read_only.stderr
    stuck = once(workspace)
    assert [r.kind for r in stuck.receipts] == ["state_change", "storage_error"]
    assert [r.receipt for r in stuck.receipts] == [0, 0] and stuck.exit_code == 1
    assert "read-only" in stuck.receipts[1].detail
    assert tree_digest(workspace) == before
    subprocess.run(["mount", "-o", "remount,rw", str(small_mount)], check=True)
    free = os.statvfs(small_mount).f_bavail * os.statvfs(small_mount).f_frsize
    (small_mount / "ballast").write_bytes(b"\0" * (free - (256 << 10)))  # 256 KiB left
    before = tree_digest(workspace)
    full = refused(lambda: register_job(workspace, jobs.ids[-1], "exp-a", how="adopt"))
    assert "is full" in full.cause and tree_digest(workspace) == before


def test_two_watchers_at_once_never_duplicate_a_receipt(workspace: Path, jobs: Jobs) -> None:
    a, b, b2 = (jobs.submit("--hold") for _ in range(3))
    register_job(workspace, a, "exp-a", how="adopt")
    register_job(workspace, b, "exp-b", how="adopt")
    jobs.cancel(b)
    jobs.wait(b, "CANCELLED")
    register_job(workspace, b2, "exp-b", how="adopt")  # b is over: no conflict yet
    jobs.control("requeue", b)  # b is live again: two live jobs for exp-b

    def two_ticks() -> list[dict[str, Any]]:
        argv = [*CLI, "slurm", "watch", "--workspace", str(workspace), "--once", "--json"]
        run = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs = [subprocess.Popen(argv, **run) for _ in range(2)]  # type: ignore[call-overload]
        outs = [p.communicate(timeout=WAIT_S) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        return [r for out, _err in outs for r in json.loads(out)["receipts"]]

    seen = two_ticks()
    first = [("state_change", a), ("state_change", b), ("state_change", b2)]
    assert sorted(kinds(seen)) == sorted([*first, ("live_conflict", None)])
    (conflict,) = (r for r in seen if r["kind"] == "live_conflict")
    assert f"experiment exp-b has 2 live jobs: {', '.join(sorted([b, b2]))}" in conflict["detail"]
    jobs.cancel(a, b, b2)
    for job in (a, b, b2):
        jobs.wait(job, "CANCELLED")
    seen = two_ticks()  # exp-a is unfinished, exp-b completed
    assert sorted(kinds(seen)) == sorted([*first, ("ended_unfinished", a)])
    ledger = receipts(workspace)
    assert [r["receipt"] for r in ledger] == list(range(1, len(ledger) + 1)) and len(ledger) == 8


# --------------------------------------------------------------------------------------------
# Sanitization


def test_a_planted_secret_appears_in_no_receipt_log_line_or_tool_result(
    workspace: Path, jobs: Jobs, tmp_path: Path
) -> None:
    secret = "s3cr3t-planted-4711"
    secret_dir = tmp_path / f"cwd-{secret}"
    secret_dir.mkdir()
    job = jobs.submit(
        f"--job-name=name-{secret}", f"--chdir={secret_dir}", "--export=ALL",
        env={"AUTOML_PLANTED": secret, "HTTPS_PROXY": f"https://u:{secret}@proxy"},
        command=f"echo {secret}; sleep 300",
    )  # fmt: skip
    shown = subprocess.run(
        ["squeue", "--noheader", f"--jobs={job}", "--Format=Name:|,WorkDir:|"],
        capture_output=True, text=True, check=True, env=jobs.cluster.env(),
    )  # fmt: skip
    assert shown.stdout.count(secret) == 2  # the scheduler has it, so a leak would show
    register_job(workspace, job, "exp-a", how="adopt")
    outputs = [run_cli("slurm", "watch", "--workspace", str(workspace), "--once", "--json")]
    jobs.cancel(job)
    jobs.wait(job, "CANCELLED")
    outputs.append(run_cli("slurm", "watch", "--workspace", str(workspace), "--once"))

    async def tool() -> str:
        async with Client(server) as client:
            result = await client.call_tool(
                "watch_slurm", {"workspace": str(workspace), "pending_after": 0}
            )
        assert not result.is_error, result.content
        return json.dumps(result.structured_content) + result.content[0].text  # type: ignore[union-attr]

    reply = anyio.run(tool)
    assert job in reply and "ended_unfinished" in receipts(workspace)[-1]["kind"]
    texts = [o.stdout + o.stderr for o in outputs] + [reply]
    texts += [p.read_text() for p in (workspace / ".automl-setup").glob("slurm-*")]
    assert all(secret not in text for text in texts)
