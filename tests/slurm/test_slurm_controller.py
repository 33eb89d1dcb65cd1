"""The SLURM controller on the real scheduler (tests/slurm/README.md): submit, run, requeue by
preemption and by the warning signal, resume by generation, the allocation cap, malformed
variables, the startup helper, the identity gate on a later generation, argv byte identity and
PID equality, status and cancel.

One source repository and one installed environment serve the module; the identity test
tampers with an environment of its own. Workloads are the quadratic one with short sleeps.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.types import CallToolResult
from support import mcp as mcp_support
from support.cli import run_cli
from support.engines import install_main, new_source_repo
from support.refengine import (
    engine,
    events,
    holdable,
    holding,
    manifest_data,
    wait_for,
    write_manifest,
)
from support.slurm_cluster import SlurmCluster, start_requeued_job
from support.trees import env_snapshot, tree_digest

from mcp_server.experiments.attempts import AttemptEntry, read_attempts
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.faces.mcp.server import server
from mcp_server.slurm.scheduler import LIVE_STATES, query_job
from mcp_server.slurm.template import EXIT_BOOTSTRAP, EXIT_IDENTITY, EXIT_INVALID
from mcp_server.source.sourcerepo import SourceRepository
from mcp_server.values import ExperimentId

pytestmark = pytest.mark.slow
SCHEDULER_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory, slurm_cluster: SlurmCluster
) -> tuple[SourceRepository, Path]:
    root = tmp_path_factory.mktemp("slurm-controller")
    repo = new_source_repo(root / "repo")
    return repo, install_main(root / "env", repo)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "ws"


def scontrol(*args: str) -> str:
    proc = subprocess.run(["scontrol", *args], capture_output=True, text=True, check=True)
    return proc.stdout


def job_field(job_id: str, name: str) -> str:
    for word in scontrol("show", "job", "-o", job_id).split():
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
    raise AssertionError(f"no {name} for job {job_id}")


def wait_on(job_id: str, predicate: Callable[[], bool]) -> None:
    """wait_for, naming the job's scheduler state when it times out."""
    try:
        wait_for(predicate, timeout=SCHEDULER_TIMEOUT, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; job {job_id}: {scontrol('show', 'job', '-o', job_id)}"
        ) from None


def wait_job(job_id: str, states: set[str]) -> str:
    wait_on(job_id, lambda: query_job(job_id).state in states)
    return query_job(job_id).state


def release(job_id: str) -> None:
    """A requeued job waits for its begin time; start it now."""
    wait_on(job_id, lambda: job_field(job_id, "JobState") == "PENDING")
    start_requeued_job(job_id)


def submit(
    env: Path, workspace: Path, tmp_path: Path, *extra: str, **manifest: Any
) -> tuple[str, Path]:
    path = write_manifest(tmp_path / "m.yaml", manifest_data(**manifest))
    args = ["--manifest", str(path), "--workspace", str(workspace), "--python", str(env)]
    result = run_cli("slurm", "submit", *args, *extra, "--json")
    assert result.code == 0, result.output
    submitted = json.loads(result.stdout)
    assert submitted["notes"] == []  # registered for the watcher too
    return submitted["job_id"], path


def ledger(workspace: Path, experiment_id: str = "exp") -> list[AttemptEntry]:
    return read_attempts(ExperimentFiles(workspace, ExperimentId(experiment_id)))[0]


def allocations(workspace: Path) -> list[tuple[str, str, int | None]]:
    return [(e.action, e.outcome, e.generation) for e in ledger(workspace) if e.job_id]


def started(workspace: Path, count: int) -> bool:
    return len(events(workspace, "trial_started")) >= count


def started_in(workspace: Path, session: int, index: int | None = None) -> bool:
    """Whether a trial (that trial, given its index) started in that controller session: a
    count over the whole ledger may already include the trials of earlier generations."""
    return any(
        e["session"] == session and index in (None, e["index"])
        for e in events(workspace, "trial_started")
    )


def job_log(workspace: Path, job_id: str) -> str:
    return (workspace / ".automl-setup" / "exp" / f"slurm-{job_id}.out").read_text()


@pytest.fixture
def cleanup() -> Iterator[list[str]]:
    """Job ids to cancel at the end, whatever happened."""
    jobs: list[str] = []
    yield jobs
    for job in jobs:
        subprocess.run(["scancel", job], capture_output=True, check=False)


def batch_shell(job_id: str) -> set[int]:
    """The process the batch step started: of the job's pids, the one whose parent is not one
    of them (slurmstepd's child; trials are the engine's children)."""
    pids = {int(line.split()[0]) for line in scontrol("listpids", job_id).splitlines()[1:]}
    parent: dict[int, int] = {}
    for p in pids:
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except FileNotFoundError:
            continue  # exited since listpids (a short-lived helper): not the batch step
        parent[p] = int(stat.rsplit(")", 1)[1].split()[1])
    return {p for p, ppid in parent.items() if ppid not in pids}


def finished_trials(workspace: Path) -> list[tuple[int, str, float]]:
    return sorted(
        (e["index"], json.dumps(s["params"], sort_keys=True), e["value"])
        for e in events(workspace, "trial_finished")
        for s in events(workspace, "trial_started")
        if s["index"] == e["index"] and s["attempt"] == e["attempt"]
    )


def test_requeue_and_warning_signal_resume_by_generation_to_the_uninterrupted_result(
    setup: tuple[SourceRepository, Path], workspace: Path, tmp_path: Path, cleanup: list[str]
) -> None:
    _repo, env = setup
    # The hold fixes where each signal lands: first on trial 0 (generation 0 is interrupted
    # in it, and its pids stay put), then on trial 3 (generation 1 is interrupted in it, with
    # trials left for generation 2). Each move goes before the release.
    hold = tmp_path / "hold"
    argv = holdable(manifest_data()["workload"]["argv"], hold)
    with holding(hold, 0):
        job, manifest = submit(env, workspace, tmp_path, max_trials=6, argv=argv)
        cleanup.append(job)
        wait_on(job, lambda: started(workspace, 1))

        # The batch step's PID is the engine's, and its command line is the bound argv, byte
        # for byte.
        binding = json.loads((workspace / ".automl-setup" / "exp" / "binding.json").read_text())
        (pid,) = batch_shell(job)
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        assert cmdline == [a.encode() for a in binding["argv"]]
        assert events(workspace, "session_started")[0]["pid"] == pid
        gate = next(e for e in ledger(workspace) if e.generation == 0)
        assert (gate.pid, gate.job_id, gate.outcome) == (pid, job, "accepted")
        assert gate.identity_digest == binding["engine"]["identity_digest"] and gate.node

        scontrol("requeue", job)  # preemption: SIGTERM, then the scheduler requeues the job
        wait_on(job, lambda: len(events(workspace, "session_ended")) == 1)
        hold.write_text("3")
        release(job)
        wait_on(job, lambda: started_in(workspace, 2, index=3))
        # The warning signal: the engine stops starting trials and requeues its own job.
        subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True)
        wait_on(job, lambda: len(events(workspace, "session_ended")) == 2)
    release(job)
    assert wait_job(job, {"completed", "failed"}) == "completed", job_log(workspace, job)[-2500:]

    assert [e["mode"] for e in events(workspace, "session_started")] == ["run", "resume", "resume"]
    ended = [e["signal"] for e in events(workspace, "session_ended")]
    assert ended == ["SIGTERM", "SIGUSR1", None]
    assert f"requeueing job {job} (warning signal)" in job_log(workspace, job)
    assert allocations(workspace) == [
        ("submit", "accepted", None),
        ("launch", "accepted", 0),
        ("exit", "exited", 0),
        ("resume", "accepted", 1),
        ("exit", "exited", 1),
        ("resume", "accepted", 2),
    ]
    alone = tmp_path / "alone"
    assert engine("run", "--manifest", manifest, "--workspace", alone, "--approve").returncode == 0
    assert finished_trials(workspace) == finished_trials(alone)

    status = run_cli("slurm", "status", "--experiment-id", "exp", "--workspace", str(workspace))
    assert status.code == 0 and f"SLURM job {job} completed" in status.stdout, status.output
    assert "generation: 2" in status.stdout and "completed, trials done 6 of 6" in status.stdout
    assert run_cli("status", "--experiment-id", "exp", "--workspace", str(workspace)).code == 0


def test_the_third_allocation_of_a_cap_of_2_exits_2_and_the_ledger_says_why(
    setup: tuple[SourceRepository, Path], workspace: Path, tmp_path: Path, cleanup: list[str]
) -> None:
    _repo, env = setup
    job, _ = submit(env, workspace, tmp_path, "--max-allocations", "002", max_trials=30, sleep=1)
    cleanup.append(job)
    for generation in (0, 1):
        # A trial of this generation's own session (session = generation + 1): only then is
        # the job running again, so the requeue cannot hit the pending job.
        wait_on(job, lambda g=generation: started_in(workspace, g + 1))
        scontrol("requeue", job)
        release(job)
    assert wait_job(job, {"failed", "completed"}) == "failed"
    assert job_field(job, "ExitCode") == f"{EXIT_INVALID}:0"
    assert len(events(workspace, "session_started")) == 2  # nothing started the third time
    last = ledger(workspace)[-1]
    assert (last.outcome, last.generation, last.job_id) == ("refused", 2, job)
    assert "allocations exhausted: generation 2 >= cap 2" in last.reason
    assert "allocations exhausted" in job_log(workspace, job)


def sbatch_rendered(workspace: Path, **variables: str) -> str:
    """The experiment's rendered controller, submitted again with crafted variables."""
    script = workspace / ".automl-setup" / "exp" / "controller.sbatch"
    exports = ",".join(["ALL", *(f"{k}={v}" for k, v in variables.items())])
    out = workspace / ".automl-setup" / "exp" / "crafted-%j.out"
    argv = ["sbatch", "--parsable", f"--export={exports}", f"--output={out}", str(script)]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def test_malformed_variables_and_a_failing_helper_stop_the_job_before_anything(
    setup: tuple[SourceRepository, Path], workspace: Path, tmp_path: Path, cleanup: list[str]
) -> None:
    _repo, env = setup
    job, manifest = submit(env, workspace, tmp_path, max_trials=1, sleep=0)
    cleanup.append(job)
    # `slurm render` shows a reviewer exactly the script submit wrote, and writes nothing.
    args = ["--manifest", str(manifest), "--workspace", str(workspace), "--python", str(env)]
    rendered = run_cli("slurm", "render", *args)
    script = workspace / ".automl-setup" / "exp" / "controller.sbatch"
    assert rendered.code == 0 and rendered.stdout == script.read_text(), rendered.output
    assert wait_job(job, {"completed", "failed"}) == "completed"
    helpers = {}
    for name, code in (("failing", 75), ("passing", 0)):
        helpers[name] = tmp_path / name
        helpers[name].write_text(f"#!/bin/bash\ntouch {tmp_path}/{name}-ran\nexit {code}\n")
        helpers[name].chmod(0o755)
    before = tree_digest(workspace, skip=lambda rel: rel.name.startswith("crafted-"))
    cases = {
        "AUTOML_ACTION": ({"AUTOML_ACTION": "start"}, EXIT_INVALID),
        "AUTOML_CONTROLLER_MAX_ALLOCATIONS": (
            {
                "AUTOML_CONTROLLER_MAX_ALLOCATIONS": "0x3",
                "AUTOML_STARTUP_HELPER": str(helpers["passing"]),
            },
            EXIT_INVALID,
        ),
        "startup helper": ({"AUTOML_STARTUP_HELPER": str(helpers["failing"])}, EXIT_BOOTSTRAP),
    }
    jobs = {name: sbatch_rendered(workspace, **env_vars) for name, (env_vars, _) in cases.items()}
    cleanup.extend(jobs.values())
    for name, (_, code) in cases.items():
        assert wait_job(jobs[name], {"failed", "completed"}) == "failed"
        assert job_field(jobs[name], "ExitCode") == f"{code}:0"  # never 75, which requeues
        out = workspace / ".automl-setup" / "exp" / f"crafted-{jobs[name]}.out"
        assert name in out.read_text()
    # The malformed cap was diagnosed before its helper; nothing reached the gate or engine.
    assert (tmp_path / "failing-ran").exists() and not (tmp_path / "passing-ran").exists()
    assert tree_digest(workspace, skip=lambda rel: rel.name.startswith("crafted-")) == before


def test_a_node_environment_that_differs_at_generation_1_refuses_with_the_diff(
    setup: tuple[SourceRepository, Path], workspace: Path, tmp_path: Path, cleanup: list[str]
) -> None:
    repo, _shared = setup
    env = install_main(tmp_path / "env", repo)
    job, _ = submit(env, workspace, tmp_path, max_trials=30, sleep=1)
    cleanup.append(job)
    wait_on(job, lambda: started(workspace, 1))
    (search,) = env.glob("lib/python*/site-packages/automl_refengine/search.py")
    # A new file, never an edit in place: uv hardlinks installed files to its cache.
    tampered = search.read_text() + "\n# tampered between allocations\n"
    search.unlink()
    search.write_text(tampered)
    scontrol("requeue", job)
    release(job)
    assert wait_job(job, {"failed", "completed"}) == "failed"
    assert job_field(job, "ExitCode") == f"{EXIT_IDENTITY}:0", job_log(workspace, job)
    assert job_field(job, "Restarts") == "1"  # refused, and not requeued again
    last = ledger(workspace)[-1]
    assert (last.action, last.outcome, last.generation, last.job_id) == (
        "resume", "refused", 1, job,
    )  # fmt: skip
    assert last.node and any("search.py" in d.field for d in last.differences)
    assert "search.py" in job_log(workspace, job) and "exit 78" in job_log(workspace, job)
    assert len(events(workspace, "session_started")) == 1  # the engine never started again


async def mcp_status_and_cancel(workspace: Path) -> tuple[dict[str, Any], CallToolResult]:
    where = {"experiment_id": "exp", "workspace": str(workspace)}
    async with Client(server) as client:
        status = await mcp_support.call_ok(client, "status_slurm_job", where)
        return status, await client.call_tool("cancel_slurm_job", where)


def test_cancel_needs_approval_then_ends_the_job_and_keeps_the_experiment_resumable(
    setup: tuple[SourceRepository, Path], workspace: Path, tmp_path: Path, cleanup: list[str]
) -> None:
    _repo, env = setup
    job, _ = submit(env, workspace, tmp_path, max_trials=30, sleep=1)
    cleanup.append(job)
    wait_on(job, lambda: started(workspace, 1))
    args = ["--experiment-id", "exp", "--workspace", str(workspace)]
    # Everything of ours but the job log, which the running engine writes to.
    ours = workspace / ".automl-setup"
    before = tree_digest(ours, skip=lambda rel: rel.name.startswith("slurm-"))
    refused = run_cli("slurm", "cancel", *args)
    assert refused.code == 2 and "needs the user's yes" in refused.stderr
    # The same two operations as MCP tools (the real SDK client, in memory).
    status, unapproved = anyio.run(mcp_status_and_cancel, workspace)
    assert status["job_id"] == job and status["scheduler"]["state"] == "running"
    assert f"SLURM job {job} running" in status["message"]
    assert "needs the user's yes" in mcp_support.error_text(unapproved, "cancel_slurm_job")
    assert tree_digest(ours, skip=lambda rel: rel.name.startswith("slurm-")) == before
    assert query_job(job).state in LIVE_STATES

    result = run_cli("slurm", "cancel", *args, "--approve", "--json")
    assert result.code == 0, result.output
    assert json.loads(result.stdout)["job_id"] == job
    assert wait_job(job, {"cancelled"}) == "cancelled"
    assert ledger(workspace)[-1].action == "cancel"
    wait_on(job, lambda: events(workspace, "session_ended") != [])
    assert events(workspace, "session_ended")[0]["signal"] == "SIGTERM"  # state saved
    again = run_cli("slurm", "cancel", *args, "--approve")
    assert again.code == 1 and "nothing to cancel" in again.stderr


def test_refused_submits_leave_nothing_behind(
    setup: tuple[SourceRepository, Path], workspace: Path, tmp_path: Path
) -> None:
    _repo, env = setup
    path = write_manifest(tmp_path / "m.yaml", manifest_data(max_trials=1))
    args = ["--manifest", str(path), "--workspace", str(workspace), "--python", str(env)]
    before = env_snapshot(env)
    bad = run_cli("slurm", "submit", *args, "--sbatch-arg=--no-requeue")
    assert bad.code == 2 and "--sbatch-arg" in bad.stderr
    refused = run_cli("slurm", "submit", *args, "--partition", "nosuchpartition")
    assert refused.code == 1 and "sbatch refused" in refused.stderr, refused.output
    assert tree_digest(workspace) == {} and env_snapshot(env) == before
