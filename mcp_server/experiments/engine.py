"""The engine process: which console script runs it, the isolated command line and environment it
runs with, starting it with the controller lock, forwarding signals to it, and its read-only
`plan` and `status` commands."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcp_server.children.run import run_captured, run_to, start, wait_exit
from mcp_server.environment.probe import Probe
from mcp_server.environment.records import InstallRecord, RecordStore
from mcp_server.environment.target import TargetEnv
from mcp_server.errors import ExitCode, Fix, SetupError
from mcp_server.experiments.binding import Binding
from mcp_server.fsutil import open_log
from mcp_server.target_side import command

STATUS_TIMEOUT_S = 60.0
PLAN_TIMEOUT_S = 60.0
PLAN_OUTPUT_BYTES = 8192  # of the engine's error output a refusal quotes
PLAN_OUTPUT_LINES = 20


def engine_script(probe: Probe, record: InstallRecord) -> str:
    dist = probe.dists.get(record.build.distribution)
    scripts = dist.console_scripts if dist else ()
    if len(scripts) != 1:
        raise SetupError(
            "launch",
            f"{record.build.distribution} declares {len(scripts)} console scripts "
            f"({', '.join(scripts) or 'none'}); cannot tell which runs experiments",
            "this engine is not launchable by automl-setup",
        )
    return scripts[0]


def engine_command(interpreter: Path, distribution: str, cli: str, args: list[str]) -> list[str]:
    """argv that runs console script `cli` of `distribution` with `interpreter`, through the
    launcher (target_side/launcher.py: never through the script's shebang, which in a copied
    venv names the original's interpreter), isolated and writing no bytecode (`command`: a
    full disk would leave a truncated .pyc in the environment that every later start trips on)."""
    return command(interpreter, "launcher", distribution, cli, *args)


def require_record(env: TargetEnv, step: str) -> InstallRecord:
    record = RecordStore(env.state_dir).read_record()
    if record is None:
        raise SetupError(
            step,
            f"no engine installed by automl-setup in {env.prefix} (no record)",
            [
                "install the engine first (with your engine's profile): ",
                Fix("install", (("branch", "BRANCH"), ("python", str(env.prefix)))),
            ],
            exit_code=ExitCode.NOTHING_INSTALLED,
        )
    return record


def _engine_env(prefix: Path, interpreter: Path) -> dict[str, str]:
    """The engine's environment variables: those of its own venv (trials inherit them)."""
    run_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run_env["VIRTUAL_ENV"] = str(prefix)
    # Its trials run the environment's Python too (without -I): none writes bytecode into it.
    run_env["PYTHONDONTWRITEBYTECODE"] = "1"
    run_env["PATH"] = f"{interpreter.parent}{os.pathsep}{run_env.get('PATH', '')}"
    return run_env


def spawn(argv: list[str], env: TargetEnv, log_path: Path, lock_fd: int) -> subprocess.Popen[bytes]:
    log = open_log(log_path)  # never through a link planted at the attempt's log name
    try:
        engine_env = _engine_env(env.prefix, env.interpreter)
        lock = (lock_fd,)  # inherited: the controller lock is held exactly as long as it lives
        return start(argv, env=engine_env, stdout=log, stderr=subprocess.STDOUT, pass_fds=lock)
    finally:
        os.close(log)


def engine_plan(
    env: TargetEnv, distribution: str, cli: str, manifest: Path, workspace: Path
) -> None:
    """The engine's own read-only `plan` of the manifest, bounded in time and in how much of
    its output is read: a manifest the engine rejects is refused before anything exists (no
    sidecar, binding, ledger or registry entry), so its id stays free."""
    step = "check manifest"
    args = ["plan", "--manifest", str(manifest), "--workspace", str(workspace)]
    with tempfile.TemporaryFile() as errors:
        try:
            code = run_to(
                engine_command(env.interpreter, distribution, cli, args),
                step=step, timeout=PLAN_TIMEOUT_S, watch=None,
                stdout=subprocess.DEVNULL,  # the plan itself can be long; only errors matter
                stderr=errors, env=_engine_env(env.prefix, env.interpreter),
            )  # fmt: skip
        except OSError as exc:
            raise SetupError(
                step,
                f"the engine could not be run to check the manifest: {exc.strerror}",
                f"run `automl-setup verify --python {env.prefix}`",
            ) from None
        except subprocess.TimeoutExpired:
            raise SetupError(
                step,
                f"the engine's `{cli} plan` of {manifest} did not finish within "
                f"{PLAN_TIMEOUT_S:.0f} s",
                "make the search smaller, then launch again; nothing was created",
            ) from None
        if code == 0:
            return
        errors.seek(0)
        text = errors.read(PLAN_OUTPUT_BYTES).decode("utf-8", "replace")
    lines = [line.strip()[:300] for line in text.splitlines() if line.strip()]
    crashed = engine_crash(code, text)
    if crashed is not None:
        raise SetupError(
            step,
            f"the engine failed to start or crashed running `{cli} plan` ({crashed}): the "
            "manifest was not judged; nothing was created, the id is still free",
            [
                "check the environment with ",
                Fix("verify", (("python", str(env.prefix)), ("deep", True))),
                "; an interrupted install is undone by ",
                Fix("repair", (("python", str(env.prefix)),)),
                ", damaged files by installing the recorded commit again",
            ],
            details=lines[-PLAN_OUTPUT_LINES:],
        )
    lines = lines[:PLAN_OUTPUT_LINES] + (["..."] if len(lines) > PLAN_OUTPUT_LINES else [])
    raise SetupError(
        step,
        f"the engine's `{cli} plan` rejects {manifest} (exit {code})",
        "fix the manifest and launch again; nothing was created, the id is still free",
        exit_code=ExitCode.INVALID_INPUT if code == ExitCode.INVALID_INPUT else ExitCode.REFUSED,
        details=lines,
    )


def engine_crash(code: int, output: str) -> str | None:
    """How the engine crashed, when it did rather than answer: killed by a signal, or an
    uncaught exception (Python's traceback; its last line names the exception). None for an
    engine that exited with its own error message."""
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if "Traceback (most recent call last):" not in lines:
        return None
    return lines[-1][:300]


def wait_forwarding_signals(
    proc: subprocess.Popen[bytes], tick: Callable[[], None] | None = None, every: float = 2.0
) -> int:
    """Foreground: SIGINT/SIGTERM/SIGHUP to us go to the engine, which stops cleanly and
    exits; we wait for it, so its exit lands in the attempts ledger. `tick` runs every
    `every` seconds while it runs (progress)."""

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    forwarded = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, forward) for s in forwarded}
    try:
        while True:
            try:
                return wait_exit(proc, every if tick else None)
            except subprocess.TimeoutExpired:
                assert tick is not None
                tick()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def engine_status(
    binding: Binding, workspace: Path, environment: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """The engine's own `status --json` (read-only) of the experiment in `workspace` (the one
    asked about, never the one the binding recorded: a moved or copied workspace is read where
    it is), run from `environment` (where the experiment last ran) or else from the
    environment it was launched in."""
    return engine_json(binding, environment, "status", ["--workspace", str(workspace)])


def status_interpreter(binding: Binding, environment: str | None) -> Path:
    """The interpreter a read-only engine command runs with: `environment`'s, else the
    launch environment's."""
    return Path(environment) / "bin" / "python" if environment else Path(binding.engine.interpreter)


def engine_json(
    binding: Binding, environment: str | None, command: str, args: list[str]
) -> tuple[dict[str, Any] | None, str | None]:
    """A read-only engine command about the bound experiment (`status`, `logs`), run with
    `--json` from `environment` or the launch environment: its JSON object, or why not."""
    engine = binding.engine
    interpreter = status_interpreter(binding, environment)
    args = [command, "--experiment-id", binding.experiment_id, *args, "--json"]
    argv = engine_command(interpreter, engine.build.distribution, engine.cli, args)
    proc, problem = _run_read_only(argv, command)
    if proc is None:
        return None, problem
    crashed = engine_crash(proc.returncode, proc.stderr)
    if crashed is not None:
        return None, (
            f"the engine crashed running {command} ({crashed}): check the environment with "
            "`automl-setup verify --deep`"
        )
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return None, f"the engine's {command} output is not a JSON object (exit {proc.returncode})"
    if proc.returncode != 0 or "error" in data:
        return None, f"engine {command}: {data.get('error', proc.stderr.strip()[-200:])}"
    return data, None


def _run_read_only(
    argv: list[str], command: str
) -> tuple[subprocess.CompletedProcess[str] | None, str | None]:
    try:
        proc = run_captured(argv, timeout=STATUS_TIMEOUT_S)
    except OSError as exc:
        return None, f"the bound engine could not be run for {command}: {exc.strerror}"
    except subprocess.TimeoutExpired:
        return None, f"the engine's {command} did not answer within {STATUS_TIMEOUT_S:.0f} s"
    return proc, None


Answer = tuple[dict[str, Any] | None, str | None]


def engine_statuses(
    command: tuple[str, str, str], experiment_ids: Sequence[str], workspace: Path
) -> list[Answer] | None:
    """`status --json` of several experiments in one engine process (`command`: interpreter,
    distribution, console script): each id's answer as `engine_status` would give it, in
    order. None when the engine does not answer for many ids in one process (the contract's
    `{"experiments": [...]}`, one entry per id asked, in order, each naming its id): then each
    is asked alone, so an engine of the older contract is never misread."""
    args = ["status", *(a for i in experiment_ids for a in ("--experiment-id", i))]
    args += ["--workspace", str(workspace), "--json"]
    interpreter, distribution, cli = command
    proc, _problem = _run_read_only(engine_command(Path(interpreter), distribution, cli, args), "")
    if proc is None or proc.returncode != 0:
        return None
    try:
        entries = json.loads(proc.stdout).get("experiments")
    except (ValueError, AttributeError):
        return None
    if not isinstance(entries, list) or len(entries) != len(experiment_ids):
        return None
    answers: list[Answer] = []
    for experiment_id, entry in zip(experiment_ids, entries, strict=True):
        if not isinstance(entry, dict) or entry.get("experiment_id") != experiment_id:
            return None
        failed = "error" in entry
        answers.append((None, f"engine status: {entry['error']}") if failed else (entry, None))
    return answers
