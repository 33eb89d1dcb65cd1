"""`automl-setup demo --sft`: an SFT AutoML run on CPU, driven the way real runs are.

A local source repository of the reference engine; an environment created with `python -m
venv` and given the machine's CPU torch by pip first (the same torch build automl-setup's own
environment has, found by this machine's pip configuration), so installing the engine from
`main` with the `training` extra keeps that torch; the `sft-lora` experiment launched (two LoRA
candidates, five steps each), interrupted with SIGTERM during the second candidate, resumed on
the same verified build; then a table of the candidates: params, steps, rollbacks, held-out
score, the merged export and its sha256, and the engine's commit and identity.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from mcp_server import operations
from mcp_server.children.run import run_to
from mcp_server.errors import SetupError
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.experiments.trials import Trial, read_trials, sft_outcomes
from mcp_server.faces.cli.demo import DemoFailure, DemoRun, _pid_gone, _wait_for
from mcp_server.requests import (
    InstallRequest,
    ProvenanceQuery,
    ResumeRequest,
)
from mcp_server.source.profile import EngineProfile
from mcp_server.source.sourcerepo import (
    DEFAULT_SUBDIRECTORY,
    REFERENCE_DISTRIBUTION,
    create_reference_repository,
    reference_engine_source,
)
from mcp_server.values import ExperimentId

EXAMPLE = "sft-lora.yaml"
TRAINING_EXTRA = "training"
PIP_TIMEOUT_S = 900.0


def torch_requirement() -> str:
    """The torch build of automl-setup's own environment, exactly (e.g. torch==2.13.0+cpu)."""
    try:
        return f"torch=={metadata.version('torch')}"
    except metadata.PackageNotFoundError:
        raise DemoFailure(
            "automl-setup's own environment has no torch, so the demo cannot tell which build "
            "this machine uses: install the CPU build into it first (pip install torch "
            "--index-url https://download.pytorch.org/whl/cpu), then run the demo again"
        ) from None


def create_torch_env(env: Path, requirement: str, log: Path) -> None:
    """`python -m venv ENV`, then `ENV/bin/pip install TORCH`: the user's choice of torch build
    is in the environment before the engine is installed into it. (`--no-compile`: Python
    compiles the modules it imports anyway; compiling all of torch's up front doubles the time.)"""
    with log.open("wb") as out:
        for argv in (
            [sys.executable, "-m", "venv", "--", str(env)],
            [
                str(env / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                requirement,
            ],
        ):
            code = run_to(argv, step="demo", timeout=PIP_TIMEOUT_S, watch=None, stdout=out)
            if code != 0:
                raise DemoFailure(f"`{' '.join(argv)}` failed (exit {code}); see {log}")


def example_manifest(workdir: Path) -> tuple[Path, str]:
    """The engine's example SFT manifest, copied into the demo's folder; and its experiment id."""
    text = (reference_engine_source() / "examples" / EXAMPLE).read_text(encoding="utf-8")
    path = workdir / EXAMPLE
    path.write_text(text, encoding="utf-8")
    return path, str(yaml.safe_load(text)["search"]["experiment_id"])


def _params(params: dict[str, Any]) -> str:
    rslora = "on" if params.get("rslora") else "off"
    return f"lr={params['lr']:.2e} rank={params['rank']} alpha={params['alpha']:g} rslora={rslora}"


def candidate_table(workspace: Path, experiment_id: str, trials: list[Trial]) -> list[str]:
    """One line per candidate and its export below it, from the trials' metrics files."""
    files = ExperimentFiles(workspace, ExperimentId(experiment_id))
    outcomes = sft_outcomes(files, read_trials(files))
    lines = [f"   {'candidate':<10} {'params':<44} {'steps':>5} {'rollbacks':>9} {'score':>6}"]
    for trial in trials:
        m = outcomes.get(trial.index)
        if m is None:
            raise DemoFailure(f"candidate {trial.index} left no readable SFT metrics")
        lines.append(
            f"   {trial.index:<10} {_params(trial.params):<44} {m.steps:>5} "
            f"{m.rollbacks:>9} {f'{m.score}/{m.questions}':>6}"
        )
        lines.append(f"   {'':<10} export {m.export_dir}  sha256 {m.export_sha256}")
    return lines


def run_sft_demo(workdir: Path | None, say: Callable[[str], None]) -> int:
    """Every step, printed; 0 only when each behaved as expected."""
    run = DemoRun.open(workdir, "automl-setup-sft-demo-", say)
    if run is None:
        return 1
    root, header = run.root, run.header
    try:
        header(f"local source repository of the reference engine ({root / 'repo'})")
        repo = create_reference_repository(root / "repo")
        profile = EngineProfile(
            repository=repo.url,
            subdirectory=DEFAULT_SUBDIRECTORY,
            distribution=REFERENCE_DISTRIBUTION,
        )
        say(f"   main -> {repo.head('main')}")

        env = root / "env-sft"
        requirement = torch_requirement()
        header(
            f"environment with the machine's torch first: python -m venv; pip install {requirement}"
        )
        create_torch_env(env, requirement, root / "torch-env.log")
        say(f"   {env} (pip log {root / 'torch-env.log'})")

        header(f"install the engine from main with --extra {TRAINING_EXTRA} (torch is kept)")
        record = operations.install(
            InstallRequest(
                profile=profile, python=str(env), branch="main", extras=(TRAINING_EXTRA,)
            ),
            lambda s, m: say(f"   [{s}] {m}"),
        ).record
        say(f"   torch {record.environment.watched.get('torch')} kept")

        header("launch the SFT experiment; SIGTERM during the second candidate")
        manifest, experiment_id = example_manifest(root)
        workspace = run.workspace
        pid, query = run.launch(manifest, env, experiment_id)

        def second_running() -> bool:
            return any(
                t.index == 1 and t.state == "running" for t in operations.status(query).trials
            )

        _wait_for("the second candidate to start", second_running)
        os.kill(pid, signal.SIGTERM)
        _wait_for("the engine to stop", lambda: _pid_gone(pid))
        status = operations.status(query)
        say(f"   after SIGTERM: state {status.state}, {status.trials_done} of 2 candidates done")
        if status.state != "interrupted" or status.trials_done != 1:
            raise DemoFailure(f"expected one finished candidate, found {status.trials_done}")

        header("resume on the same, verified build")
        resumed = operations.resume(
            ResumeRequest(
                experiment_id=experiment_id, workspace=str(workspace), manifest=str(manifest),
                python=str(env),
            )
        )  # fmt: skip
        status = operations.status(query)
        say(f"   engine exit code {resumed.exit_code}; state {status.state}")
        done = [t for t in status.trials if t.state == "succeeded"]
        if status.state != "completed" or len(done) != 2:
            raise DemoFailure(f"expected 2 completed candidates, found {len(done)}")
        report = operations.verify(ProvenanceQuery(profile=profile, python=str(env)))
        if report.status != "verified":
            raise DemoFailure(f"verification of {env} says {report.status}")

        header("candidates (score: exact answers on the 16 held-out questions)")
        for line in candidate_table(workspace, experiment_id, done):
            say(line)
        say(
            f"   engine   {record.build.distribution} {record.build.version} commit "
            f"{status.bound_commit} ({status.bound_ref})\n"
            f"   identity {status.identity_digest}"
        )
    except (SetupError, DemoFailure) as exc:
        return run.failed(exc)
    return run.ok()
