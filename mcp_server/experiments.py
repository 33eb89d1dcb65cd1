"""Experiments bound to an exact engine build: binding, lock, attempts ledger, launch, resume,
status.

automl-setup keeps its own files beside the engine's experiment directory, in
`<workspace>/.automl-setup/<experiment_id>/`, so an engine that insists on an empty experiment
directory still starts cleanly:

    binding.json      immutable, created exclusively at launch: engine identity, manifest sha256
    attempts.jsonl    append-only: every launch, resume and refusal (fsynced)
    controller.lock   flock held by the engine process for its whole life (inherited fd)
    attempt-N.log     stdout and stderr of the engine process of attempt N
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server import __version__
from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.fsutil import (
    exclusive_create,
    exclusive_lock,
    numbered_append,
    read_json_lines,
)
from mcp_server.provenance import (
    BuildIdentity,
    EnvironmentInfo,
    FieldDiff,
    InstallRecord,
    RecordStore,
    SourceIdentity,
    compute_identity_digest,
    diff_fields,
    environment_info,
    identity_fields,
    utc_now,
    verify_environment,
)
from mcp_server.registry import register_experiment
from mcp_server.targetenv import Probe, TargetEnv, locate

SIDECAR = ".automl-setup"
MAX_ID_LENGTH = 64
STATUS_TIMEOUT_S = 60.0


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineBinding(_Model):
    identity_digest: str
    source: SourceIdentity
    build: BuildIdentity
    environment: EnvironmentInfo
    environment_path: str = Field(description="sys.prefix of the environment at launch.")
    interpreter: str
    cli: str = Field(description="Console script of the engine that runs the experiment.")


class Binding(_Model):
    schema_version: Literal[1] = 1
    experiment_id: str
    workspace: str
    manifest_path: str
    manifest_sha256: str
    engine: EngineBinding
    argv: list[str] = Field(description="The engine command that launch started.")
    host: str
    time: str
    tool_version: str


class AttemptEntry(_Model):
    time: str
    action: Literal["launch", "resume", "exit"]
    outcome: Literal["accepted", "refused", "exited"]
    attempt: int = Field(description="1-based number of this attempt in the ledger.")
    host: str
    pid: int | None = None
    exit_code: int | None = None
    environment: str | None = None
    identity_digest: str | None = None
    reason: str = ""
    differences: list[FieldDiff] = Field(default_factory=list)
    log: str | None = None


class StartedEngine(_Model):
    experiment_id: str
    action: Literal["launch", "resume"]
    pid: int
    detached: bool
    exit_code: int | None = Field(description="Engine exit code (null while it runs detached).")
    log_path: str
    binding_path: str
    attempts_path: str
    engine_commit: str
    identity_digest: str


class ExperimentStatus(_Model):
    experiment_id: str
    workspace: str
    state: str
    controller_running: bool
    trials_done: int | None
    best: dict[str, Any] | None
    bound_commit: str
    bound_ref: str | None
    bound_environment: str
    identity_digest: str
    last_attempt: AttemptEntry | None
    attempts_torn_line: int | None = None
    notes: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Paths and small helpers


def validate_experiment_id(value: str) -> str:
    ok = (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID_LENGTH
        and value[0] not in ".-"
        and all(c.isascii() and (c.isalnum() or c in "-_.") for c in value)
    )
    if not ok:
        raise InvalidInput(
            "validate experiment id",
            f"{value!r} is not a valid experiment id",
            "use 1-64 letters, digits, '-', '_' or '.', not starting with '.' or '-'",
        )
    return value


@dataclass(frozen=True)
class ExperimentFiles:
    workspace: Path
    experiment_id: str

    @property
    def engine_dir(self) -> Path:
        return self.workspace / self.experiment_id

    @property
    def dir(self) -> Path:
        return self.workspace / SIDECAR / self.experiment_id

    @property
    def binding(self) -> Path:
        return self.dir / "binding.json"

    @property
    def attempts(self) -> Path:
        return self.dir / "attempts.jsonl"

    @property
    def lock(self) -> Path:
        return self.dir / "controller.lock"

    def log(self, attempt: int) -> Path:
        return self.dir / f"attempt-{attempt}.log"


def _workspace(path: str) -> Path:
    if not path or "\x00" in path:
        raise InvalidInput(
            "validate workspace",
            "the workspace path is empty or contains a NUL character",
            "pass --workspace DIR, the directory that holds the experiments",
        )
    return Path(path).expanduser().resolve()


def read_manifest(path: str) -> tuple[Path, bytes, str]:
    """(absolute path, bytes, experiment id) of a YAML or JSON manifest."""
    step = "read manifest"
    manifest = Path(path).expanduser().resolve()
    try:
        data = manifest.read_bytes()
    except OSError as exc:
        raise InvalidInput(
            step,
            f"cannot read manifest {manifest}: {exc.strerror}",
            "pass the path of the experiment's YAML or JSON manifest",
        ) from None
    try:
        parsed = yaml.safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidInput(
            step, f"{manifest} is not valid YAML or JSON: {first}", "fix the manifest"
        ) from None
    experiment_id = (parsed.get("search") or {}) if isinstance(parsed, dict) else {}
    experiment_id = experiment_id.get("experiment_id") if isinstance(experiment_id, dict) else None
    if not isinstance(experiment_id, str):
        raise InvalidInput(
            step,
            f"{manifest} has no string search.experiment_id",
            "check the manifest with the engine's `plan` command",
        )
    return manifest, data, validate_experiment_id(experiment_id)


def _host() -> str:
    return socket.gethostname()


@contextlib.contextmanager
def _next_attempt(files: ExperimentFiles) -> Iterator[tuple[int, Callable[..., AttemptEntry]]]:
    """The next attempt number, held (ledger flock) until its entry is written."""
    with numbered_append(files.attempts, key="attempt", what="attempts ledger") as (n, write):

        def log(**fields: Any) -> AttemptEntry:
            entry = AttemptEntry(time=utc_now(), host=_host(), attempt=n, **fields)
            write(entry.model_dump(mode="json"))
            return entry

        yield n, log


def _log_attempt(files: ExperimentFiles, **fields: Any) -> AttemptEntry:
    with _next_attempt(files) as (_number, log):
        return log(**fields)


@contextlib.contextmanager
def _controller_lock(files: ExperimentFiles) -> Iterator[int]:
    """The per-experiment lock; its fd is handed to the engine process, which keeps it held
    for as long as it lives (a killed engine frees it)."""
    fd = os.open(files.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SetupError(
                "lock",
                f"another controller holds the lock of experiment {files.experiment_id}",
                f"wait for it, or check `automl-setup status --experiment-id "
                f"{files.experiment_id} --workspace {files.workspace}`",
            ) from None
        yield fd
    finally:
        os.close(fd)


def lock_is_held(files: ExperimentFiles) -> bool:
    if not files.lock.exists():
        return False
    fd = os.open(files.lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _engine_script(probe: Probe, record: InstallRecord) -> tuple[str, Path]:
    dist = probe.dists.get(record.build.distribution)
    scripts = dist.console_scripts if dist else ()
    if len(scripts) != 1:
        raise SetupError(
            "launch",
            f"{record.build.distribution} declares {len(scripts)} console scripts "
            f"({', '.join(scripts) or 'none'}); cannot tell which runs experiments",
            "this engine is not launchable by automl-setup",
        )
    return scripts[0], probe.scripts / scripts[0]


def _require_record(env: TargetEnv, step: str) -> InstallRecord:
    record = RecordStore(env.state_dir).read_record()
    if record is None:
        raise SetupError(
            step,
            f"no engine installed by automl-setup in {env.prefix} (no record)",
            f"install the engine first: automl-setup install --branch BRANCH --python "
            f"{shlex.quote(str(env.prefix))} (with your engine's profile flags)",
            exit_code=ExitCode.NOTHING_INSTALLED,
        )
    return record


def _verified_record(env: TargetEnv, step: str) -> tuple[InstallRecord, Probe]:
    """The record of an engine that verifies, and the probe that verified it (one probe
    serves every later question about the environment)."""
    record = _require_record(env, step)
    probe = env.probe([record.build.distribution])
    report = verify_environment(env, record.build.distribution, probe=probe)
    if report.status != "verified":
        raise SetupError(
            step,
            f"the engine in {env.prefix} fails verification ({report.status})",
            f"run `automl-setup verify --python {env.prefix}` for details",
            details=[
                f"{d.field}: recorded {d.recorded}, found {d.found}" for d in report.differences
            ]
            + report.notes,
        )
    return record, probe


def _spawn(
    argv: list[str], env: TargetEnv, log_path: Path, lock_fd: int
) -> subprocess.Popen[bytes]:
    run_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run_env["VIRTUAL_ENV"] = str(env.prefix)
    run_env["PATH"] = f"{env.interpreter.parent}{os.pathsep}{run_env.get('PATH', '')}"
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=run_env,
            pass_fds=(lock_fd,),
            start_new_session=True,
        )


def _wait_forwarding_signals(proc: subprocess.Popen[bytes]) -> int:
    """Foreground: SIGINT/SIGTERM/SIGHUP to us go to the engine, which stops cleanly and
    exits; we wait for it, so its exit lands in the attempts ledger."""

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    forwarded = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, forward) for s in forwarded}
    try:
        return proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _start(
    files: ExperimentFiles,
    action: Literal["launch", "resume"],
    argv: list[str],
    env: TargetEnv,
    binding: Binding,
    lock_fd: int,
    detach: bool,
) -> StartedEngine:
    """Register with the environment (for the install guard), start the engine with the
    controller lock, log the attempt; in the foreground, wait and log the exit too."""
    register_experiment(
        env.state_dir, files.experiment_id, files.workspace, binding.engine.identity_digest
    )
    with _next_attempt(files) as (attempt, log):
        log_path = files.log(attempt)
        proc = _spawn(argv, env, log_path, lock_fd)
        log(
            action=action,
            outcome="accepted",
            pid=proc.pid,
            environment=str(env.prefix),
            identity_digest=binding.engine.identity_digest,
            log=str(log_path),
        )
    exit_code = None
    if not detach:
        exit_code = _wait_forwarding_signals(proc)
        _log_attempt(files, action="exit", outcome="exited", pid=proc.pid, exit_code=exit_code)
    return StartedEngine(
        experiment_id=files.experiment_id,
        action=action,
        pid=proc.pid,
        detached=detach,
        exit_code=exit_code,
        log_path=str(log_path),
        binding_path=str(files.binding),
        attempts_path=str(files.attempts),
        engine_commit=binding.engine.source.commit,
        identity_digest=binding.engine.identity_digest,
    )


# --------------------------------------------------------------------------------------------
# Launch


def launch_experiment(
    manifest: str, workspace: str, python: str | None, detach: bool
) -> StartedEngine:
    manifest_path, manifest_bytes, experiment_id = read_manifest(manifest)
    files = ExperimentFiles(_workspace(workspace), experiment_id)
    env = locate(python)
    if files.engine_dir.exists() or files.dir.exists():
        if files.engine_dir.exists():
            resume = shlex.join(
                [
                    *("automl-setup", "resume", "--experiment-id", experiment_id),
                    *("--workspace", str(files.workspace), "--manifest", str(manifest_path)),
                    *("--python", str(env.prefix)),
                ]
            )
            remedy = f"continue it with `{resume}`, or give the new experiment another id"
        else:  # launched before, but the engine refused to start it (see attempt-1.log)
            remedy = (
                f"the engine never created it (see {files.log(1)}); to reuse the id, remove "
                f"{files.dir} after reading that log, or give the experiment another id"
            )
        refusal = SetupError(
            "launch", f"experiment {experiment_id} already exists in {files.workspace}", remedy
        )
        if files.dir.is_dir():  # an experiment of ours: its ledger records the refusal
            _log_attempt(files, action="launch", outcome="refused", reason=refusal.message)
        raise refusal
    _require_record(env, "launch")  # before the lock, which would create files in the env
    store = RecordStore(env.state_dir)
    with exclusive_lock(store.lock_path, step="launch", holder=f"environment {env.prefix}"):
        record, probe = _verified_record(env, "launch")
        cli, script = _engine_script(probe, record)
        try:
            files.dir.mkdir(parents=True)
        except FileExistsError:
            raise SetupError(
                "launch",
                f"experiment {experiment_id} was launched concurrently by another process",
                "check it with `automl-setup status`, or give this experiment another id",
            ) from None
        with _controller_lock(files) as lock_fd:
            argv = [str(script), "run", "--manifest", str(manifest_path)]
            argv += ["--workspace", str(files.workspace), "--approve"]
            env_now = environment_info(probe, list(record.environment.dependencies))
            # The binding's identity is the build plus the environment as it is now (it may
            # have drifted since install; the digest must match the fields it is bound to).
            digest = compute_identity_digest(record.source, record.build, env_now)
            binding = Binding(
                experiment_id=experiment_id,
                workspace=str(files.workspace),
                manifest_path=str(manifest_path),
                manifest_sha256=hashlib.sha256(manifest_bytes).hexdigest(),
                engine=EngineBinding(
                    identity_digest=digest,
                    source=record.source,
                    build=record.build,
                    environment=env_now,
                    environment_path=str(env.prefix),
                    interpreter=str(env.interpreter),
                    cli=cli,
                ),
                argv=argv,
                host=_host(),
                time=utc_now(),
                tool_version=__version__,
            )
            exclusive_create(files.binding, binding.model_dump_json(indent=2).encode() + b"\n")
            return _start(files, "launch", argv, env, binding, lock_fd, detach)


# --------------------------------------------------------------------------------------------
# Resume


def read_binding(files: ExperimentFiles) -> Binding:
    step = "read binding"
    try:
        return Binding.model_validate_json(files.binding.read_bytes())
    except FileNotFoundError:
        raise SetupError(
            step,
            f"experiment {files.experiment_id} has no binding ({files.binding} is missing)",
            "only experiments launched by automl-setup can be resumed with proof of the engine",
        ) from None
    except (ValidationError, ValueError) as exc:
        raise SetupError(
            step,
            f"the binding {files.binding} is corrupt ({type(exc).__name__})",
            "bindings are never rewritten; restore it from a backup",
        ) from None


def recreate_commands(binding: Binding, manifest: Path) -> list[str]:
    """The exact commands that rebuild the recorded engine in a separate environment and
    resume there."""
    src, build = binding.engine.source, binding.engine.build
    new_env = f"{binding.engine.environment_path}-{src.commit[:12]}"
    install = [
        "automl-setup", "install", "--commit", src.commit,
        "--repository", src.repository, "--subdirectory", src.subdirectory,
        "--distribution", build.distribution, "--requirement", f"=={build.version}",
        "--python", new_env, "--create-env",
    ]  # fmt: skip
    resume = [
        "automl-setup", "resume", "--experiment-id", binding.experiment_id,
        "--workspace", binding.workspace, "--manifest", str(manifest), "--python", new_env,
    ]  # fmt: skip
    return [shlex.join(install), shlex.join(resume)]


def identity_differences(
    binding: Binding, record: InstallRecord, env_now: EnvironmentInfo
) -> list[FieldDiff]:
    bound = binding.engine
    recorded = identity_fields(bound.source, bound.build, bound.environment)
    found = identity_fields(record.source, record.build, env_now)
    return diff_fields(recorded, found)


def binding_differences(
    binding: Binding, env: TargetEnv, record: InstallRecord | None, probe: Probe | None = None
) -> list[FieldDiff]:
    """Every identity field where the engine installed in `env` (and the environment as it
    is now) differs from the build the experiment is bound to."""
    if record is None:
        return [FieldDiff(field="record", recorded=binding.engine.identity_digest, found=None)]
    probe = probe or env.probe([record.build.distribution])
    env_now = environment_info(probe, list(binding.engine.environment.dependencies))
    return identity_differences(binding, record, env_now)


def resume_experiment(
    experiment_id: str, workspace: str, manifest: str, python: str | None, detach: bool
) -> StartedEngine:
    files = ExperimentFiles(_workspace(workspace), validate_experiment_id(experiment_id))
    if not files.dir.is_dir():
        raise SetupError(
            "resume",
            f"no experiment {experiment_id!r} launched by automl-setup in {files.workspace}",
            f"resume takes an exact id; list them with `automl-setup experiments --workspace "
            f"{files.workspace}`",
        )
    try:
        with _controller_lock(files) as lock_fd:
            binding = read_binding(files)
            return _resume_locked(files, binding, manifest, python, detach, lock_fd)
    except SetupError as exc:
        _log_attempt(
            files,
            action="resume",
            outcome="refused",
            reason=exc.message,
            differences=getattr(exc, "differences", []),
        )
        raise


class IdentityRefusal(SetupError):
    """A refusal that carries the field-level differences for the attempts ledger."""

    def __init__(self, step: str, cause: str, remedy: str, differences: list[FieldDiff]) -> None:
        super().__init__(
            step,
            cause,
            remedy,
            details=[f"{d.field}: recorded {d.recorded}, found {d.found}" for d in differences],
        )
        self.differences = differences


def _resume_locked(
    files: ExperimentFiles,
    binding: Binding,
    manifest: str,
    python: str | None,
    detach: bool,
    lock_fd: int,
) -> StartedEngine:
    recreate = recreate_commands(binding, Path(manifest).expanduser().resolve())
    remedy = "recreate the recorded engine in a separate environment and resume there:\n    " + (
        "\n    ".join(recreate)
    )
    manifest_path, manifest_bytes, manifest_id = read_manifest(manifest)
    digest = hashlib.sha256(manifest_bytes).hexdigest()
    if digest != binding.manifest_sha256 or manifest_id != binding.experiment_id:
        raise IdentityRefusal(
            "resume",
            f"the manifest {manifest_path} is not the one experiment {binding.experiment_id} "
            "was launched with",
            f"resume with the original manifest ({binding.manifest_path})",
            [FieldDiff(field="manifest_sha256", recorded=binding.manifest_sha256, found=digest)],
        )
    env = locate(python)
    store = RecordStore(env.state_dir)
    # Checked before the lock, which would create files in an environment we never installed.
    if store.read_record() is None:
        raise IdentityRefusal(
            "resume",
            f"no engine record in {env.prefix}: nothing proves it is the bound engine",
            remedy,
            [FieldDiff(field="record", recorded=binding.engine.identity_digest, found=None)],
        )
    with exclusive_lock(store.lock_path, step="resume", holder=f"environment {env.prefix}"):
        record = _require_record(env, "resume")
        probe = env.probe([record.build.distribution])
        report = verify_environment(env, record.build.distribution, probe=probe)
        if report.status != "verified":
            raise IdentityRefusal(
                "resume",
                f"the engine in {env.prefix} fails verification ({report.status})",
                remedy,
                report.differences
                or [FieldDiff(field="verification", recorded="verified", found=report.status)],
            )
        differences = binding_differences(binding, env, record, probe)
        if differences:
            raise IdentityRefusal(
                "resume",
                f"the engine in {env.prefix} is not the build experiment "
                f"{binding.experiment_id} is bound to ({len(differences)} fields differ)",
                remedy,
                differences,
            )
        _cli, script = _engine_script(probe, record)
        argv = [str(script), "resume", "--manifest", str(manifest_path)]
        argv += ["--workspace", str(files.workspace), "--approve"]
        return _start(files, "resume", argv, env, binding, lock_fd, detach)


# --------------------------------------------------------------------------------------------
# Status


def engine_status(
    binding: Binding, environment: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """The engine's own `status --json` (read-only), run from `environment` (where the
    experiment last ran) or else from the environment it was launched in."""
    scripts = Path(environment) / "bin" if environment else Path(binding.engine.interpreter).parent
    script = scripts / binding.engine.cli
    argv = [str(script), "status", "--experiment-id", binding.experiment_id]
    argv += ["--workspace", binding.workspace, "--json"]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=STATUS_TIMEOUT_S,
            check=False,
        )
    except OSError as exc:
        return None, f"the bound engine could not be run for status: {exc.strerror}"
    except subprocess.TimeoutExpired:
        return None, f"the engine's status did not answer within {STATUS_TIMEOUT_S:.0f} s"
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        return None, f"the engine's status output is not JSON (exit {proc.returncode})"
    if proc.returncode != 0 or "error" in data:
        return None, f"engine status: {data.get('error', proc.stderr.strip()[-200:])}"
    return data, None


def experiment_status(experiment_id: str, workspace: str) -> ExperimentStatus:
    files = ExperimentFiles(_workspace(workspace), validate_experiment_id(experiment_id))
    if not files.dir.is_dir():
        raise SetupError(
            "status",
            f"no experiment {experiment_id!r} launched by automl-setup in {files.workspace}",
            f"list experiments with `automl-setup experiments --workspace {files.workspace}`",
            exit_code=ExitCode.NOTHING_INSTALLED,
        )
    binding = read_binding(files)
    attempts = read_json_lines(files.attempts, what="attempts ledger")
    last = AttemptEntry.model_validate(attempts.entries[-1]) if attempts.entries else None
    running = lock_is_held(files)
    accepted = [
        e for e in attempts.entries if e.get("outcome") == "accepted" and e.get("environment")
    ]
    data, problem = engine_status(binding, accepted[-1]["environment"] if accepted else None)
    notes = [problem] if problem else []
    if attempts.torn_line:
        notes.append(f"attempts ledger line {attempts.torn_line} is torn (interrupted write)")
    state = str(data["state"]) if data else ("running" if running else "unknown")
    return ExperimentStatus(
        experiment_id=experiment_id,
        workspace=str(files.workspace),
        state=state,
        controller_running=running,
        trials_done=data.get("trials_done") if data else None,
        best=data.get("best") if data else None,
        bound_commit=binding.engine.source.commit,
        bound_ref=binding.engine.source.requested_ref,
        bound_environment=binding.engine.environment_path,
        identity_digest=binding.engine.identity_digest,
        last_attempt=last,
        attempts_torn_line=attempts.torn_line,
        notes=notes,
    )


class ExperimentListing(_Model):
    workspace: str
    experiments: list[ExperimentStatus]
    unreadable: list[str] = Field(
        default_factory=list, description="Experiments whose files could not be read, and why."
    )


def list_experiments(workspace: str) -> ExperimentListing:
    """Every experiment of the workspace; one damaged experiment does not hide the others."""
    where = _workspace(workspace)
    if where.exists() and not where.is_dir():
        raise InvalidInput("experiments", f"{where} is not a directory", "pass the workspace")
    root = where / SIDECAR
    found, unreadable = [], []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if not path.is_dir():
            continue
        try:
            found.append(experiment_status(path.name, workspace))
        except SetupError as exc:
            unreadable.append(f"{path.name}: {exc.message}")
    return ExperimentListing(workspace=str(where), experiments=found, unreadable=unreadable)


def format_status(status: ExperimentStatus) -> str:
    best = status.best or {}
    value = best.get("value")
    lines = [
        f"{status.experiment_id}: {status.state}"
        + (" (controller running)" if status.controller_running else ""),
        f"  trials done: {status.trials_done if status.trials_done is not None else '?'}",
        f"  best: {value if value is not None else '-'} {json.dumps(best.get('params', {}))}",
        f"  engine: {status.bound_commit} ({status.bound_ref or 'by commit'})"
        f" in {status.bound_environment}",
    ]
    if status.last_attempt:
        a = status.last_attempt
        what = (
            f"engine exited with code {a.exit_code}"
            if a.action == "exit"
            else f"{a.action} {a.outcome}"
        )
        lines.append(f"  last attempt: #{a.attempt} {what} at {a.time}")
    lines += [f"  note: {n}" for n in status.notes]
    return "\n".join(lines)
