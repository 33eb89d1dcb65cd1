"""`automl-setup demo`: the whole story on the embedded reference engine, offline from GitHub.

A local source repository with `main` and a development branch; install from `main` into a
fresh environment; launch an experiment; interrupt it with SIGTERM; resume it to the end; show
the verified provenance and the best trial; install the development branch into a second
environment and show that resuming the experiment there is refused, field by field; end by
writing the experiment's report and printing its path.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from mcp_server import operations
from mcp_server.errors import SetupError
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.started import StartedEngine
from mcp_server.experiments.trials import read_trials
from mcp_server.report.make import make_report
from mcp_server.requests import (
    InstallRequest,
    LaunchRequest,
    ProvenanceQuery,
    ReportQuery,
    ResumeRequest,
    StatusQuery,
)
from mcp_server.source.profile import EngineProfile
from mcp_server.source.sourcerepo import (
    DEFAULT_SUBDIRECTORY,
    REFERENCE_DISTRIBUTION,
    create_reference_repository,
    reference_engine_source,
)

DEV_BRANCH = "dev/next"
EXPERIMENT_ID = "demo-quadratic"
TRIALS = 8
POLL_S = 0.1
WAIT_S = 60.0


class DemoFailure(Exception):
    """A demo step did not behave as expected."""


def _wait_for(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise DemoFailure(f"timed out waiting for {what}")
        time.sleep(POLL_S)


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie child of ours still answers kill(0); reap it if it is ours.
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


def _manifest(workdir: Path) -> Path:
    example = reference_engine_source() / "examples" / "quadratic.yaml"
    data = yaml.safe_load(example.read_text(encoding="utf-8"))
    data["search"]["experiment_id"] = EXPERIMENT_ID
    data["search"]["budget"]["max_trials"] = TRIALS
    path = workdir / "manifest.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


class DemoRun:
    """A demo's folder, its numbered and timed step headers, and its last line (both demos)."""

    def __init__(self, root: Path, say: Callable[[str], None]) -> None:
        self.root, self.say = root, say
        self.started = time.monotonic()
        self.step = 0

    @classmethod
    def open(cls, workdir: Path | None, prefix: str, say: Callable[[str], None]) -> DemoRun | None:
        """In a new or empty folder (a temp dir by default); None, said why, otherwise."""
        root = Path(tempfile.mkdtemp(prefix=prefix)) if workdir is None else workdir
        if root.is_dir() and any(root.iterdir()):
            say(f"DEMO REFUSED: {root} is not empty; pass a new or empty --workdir")
            return None
        root.mkdir(parents=True, exist_ok=True)
        return cls(root, say)

    def header(self, text: str) -> None:
        self.step += 1
        self.say(f"\n== {self.step}. {text}  [{time.monotonic() - self.started:.1f}s]")

    def failed(self, exc: SetupError | DemoFailure) -> int:
        text = exc.full_text() if isinstance(exc, SetupError) else str(exc)
        self.say(f"\nDEMO FAILED at step {self.step}: {text}\n   files kept in {self.root}")
        return 1

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def launch(self, manifest: Path, env: Path, experiment_id: str) -> tuple[int, StatusQuery]:
        """Launch detached into the demo's workspace; the engine's pid and the status query."""
        launched = operations.launch(
            LaunchRequest(
                manifest=str(manifest), workspace=str(self.workspace), python=str(env), detach=True
            )
        )
        self.say(f"   engine pid {launched.pid}; binding {launched.binding_path}")
        return launched.pid, StatusQuery(experiment_id=experiment_id, workspace=str(self.workspace))

    def ok(self) -> int:
        elapsed = time.monotonic() - self.started
        self.say(f"\nDEMO OK in {elapsed:.1f}s; everything is in {self.root}")
        return 0


def run_demo(workdir: Path | None, say: Callable[[str], None]) -> int:
    """Every step, printed; 0 only when each behaved as expected."""
    run = DemoRun.open(workdir, "automl-setup-demo-", say)
    if run is None:
        return 1
    root, header = run.root, run.header
    try:
        header(f"local source repository with main and {DEV_BRANCH} ({root / 'repo'})")
        repo = create_reference_repository(root / "repo", dev_branch=DEV_BRANCH)
        profile = EngineProfile(
            repository=repo.url,
            subdirectory=DEFAULT_SUBDIRECTORY,
            distribution=REFERENCE_DISTRIBUTION,
        )
        say(f"   main -> {repo.head('main')}\n   {DEV_BRANCH} -> {repo.head(DEV_BRANCH)}")

        header("install the engine from main into a fresh environment")
        env_main = root / "env-main"
        result = operations.install(
            InstallRequest(profile=profile, python=str(env_main), branch="main", create_env=True),
            lambda s, m: say(f"   [{s}] {m}"),
        )
        record = result.record
        assert record.source is not None  # built from the demo's own repository, not a wheel

        header("launch an experiment bound to that build, then interrupt it with SIGTERM")
        manifest = _manifest(root)
        workspace = run.workspace
        pid, status_query = run.launch(manifest, env_main, EXPERIMENT_ID)

        engine_files = ExperimentFiles(status_query.workspace.path, status_query.experiment_id)

        def mid_trial() -> bool:
            # The engine's own ledger, read directly: a status call starts an engine process,
            # too slow to be sure of catching a 0.3 s trial. Two trials done and a later one
            # running, so the SIGTERM interrupts a trial (not the engine between two).
            trials = read_trials(engine_files).trials
            done = sum(t.state in ("succeeded", "failed") for t in trials)
            return done >= 2 and any(t.state == "running" for t in trials)

        _wait_for("two finished trials and a later one running", mid_trial)
        os.kill(pid, signal.SIGTERM)
        _wait_for("the engine to stop", lambda: _pid_gone(pid))
        status = operations.status(status_query)
        say(f"   after SIGTERM: state {status.state}, {status.trials_done} of {TRIALS} trials")
        if status.state != "interrupted" or (status.trials_done or 0) >= TRIALS:
            raise DemoFailure(f"expected an interrupted experiment, found {status.state}")

        header("resume it on the same, verified engine build")

        def resume(env: Path) -> StartedEngine:
            return operations.resume(
                ResumeRequest(
                    experiment_id=EXPERIMENT_ID,
                    workspace=str(workspace),
                    manifest=str(manifest),
                    python=str(env),
                )
            )

        resumed = resume(env_main)
        status = operations.status(status_query)
        say(f"   engine exit code {resumed.exit_code}; state {status.state}")
        if status.state != "completed" or status.trials_done != TRIALS:
            raise DemoFailure(f"expected {TRIALS} completed trials, found {status.trials_done}")

        header("verified provenance and the best trial")
        report = operations.verify(ProvenanceQuery(profile=profile, python=str(env_main)))
        if report.status != "verified":
            raise DemoFailure(f"verification of {env_main} says {report.status}")
        best = status.best or {}
        say(
            f"   engine:   {record.build.distribution} {record.build.version}\n"
            f"   source:   {record.source.repository} {record.source.requested_ref}\n"
            f"   commit:   {record.source.commit} (subtree {record.source.subtree_id})\n"
            f"   wheel:    sha256 {record.build.wheel_sha256}\n"
            f"   identity: {record.identity_digest}\n"
            f"   verified: {report.files_checked} installed files match RECORD\n"
            f"   best:     {best.get('value')} with {best.get('params')}"
        )

        header(f"install {DEV_BRANCH} into a second environment; resuming there must refuse")
        env_dev = root / "env-dev"
        operations.install(
            InstallRequest(profile=profile, python=str(env_dev), branch=DEV_BRANCH, create_env=True)
        )
        try:
            resume(env_dev)
        except SetupError as refusal:
            say("   refused, as it must be:")
            say("   " + refusal.full_text().replace("\n", "\n   "))
        else:
            raise DemoFailure("resuming on the development branch's engine was not refused")

        header("the experiment's report: provenance card, attempts, optimisation history")
        receipt = make_report(ReportQuery(experiment_id=EXPERIMENT_ID, workspace=str(workspace)))
        say(f"   report: {receipt.html_path}\n   sha256: {receipt.html_sha256}")
        if receipt.plots_note:  # installed without the `report` extra: said, not hidden
            say(f"   plots:  {receipt.plots_note}")
    except (SetupError, DemoFailure) as exc:
        return run.failed(exc)
    return run.ok()
