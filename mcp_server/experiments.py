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
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from mcp_server import __version__
from mcp_server.errors import ExitCode, InvalidInput, SetupError, shown
from mcp_server.fsutil import (
    exclusive_create,
    new_directory,
    numbered_append,
    read_json_lines,
    shared_lock,
)
from mcp_server.persisted import Persisted, load_persisted
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
PLAN_TIMEOUT_S = 60.0
PLAN_OUTPUT_BYTES = 8192  # of the engine's error output a refusal quotes
PLAN_OUTPUT_LINES = 20
# automl-setup reads at most this much of a manifest (the engine may allow less: the reference
# engine's cap is 1,000,000 bytes, and its `plan` says so).
MAX_MANIFEST_BYTES = 1 << 20


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineBinding(Persisted):
    identity_digest: str
    source: SourceIdentity
    build: BuildIdentity
    environment: EnvironmentInfo
    environment_path: str = Field(description="sys.prefix of the environment at launch.")
    interpreter: str
    cli: str = Field(description="Console script of the engine that runs the experiment.")


class Binding(Persisted):
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


class AttemptEntry(Persisted):
    schema_version: Literal[1] = 1
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
            f"{shown(value)} is not a valid experiment id",
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


class _ManifestLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and merge keys (an alias bomb expands exponentially)
    and duplicate keys (which would silently keep the last one)."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in a manifest", mark
            )
        return super().compose_node(parent, index)  # type: ignore[no-untyped-call]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            problem = "merge keys (<<) are not allowed in a manifest"
            if key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
                try:
                    problem = f"duplicate key {key!r:.100}" if key in seen else ""
                    seen.add(key)
                except TypeError:  # unhashable: the base constructor refuses it
                    problem = ""
            if problem:
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _read_manifest_file(path: Path, limit: int, step: str, remedy: str) -> bytes:
    """At most `limit` bytes of a regular file; anything else (a FIFO, a device, a directory)
    is refused without reading it, and a larger file before parsing it."""

    def refuse(cause: str) -> InvalidInput:
        return InvalidInput(step, cause, remedy)

    try:
        if not stat.S_ISREG(path.stat().st_mode):  # before open: a FIFO would block it
            raise refuse(f"{path} is not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        try:
            info = os.fstat(fd)  # the file opened, which may have been swapped since stat
            if not stat.S_ISREG(info.st_mode):
                raise refuse(f"{path} is not a regular file")
            chunks, size = [], 0
            while size <= limit and (chunk := os.read(fd, min(1 << 16, limit + 1 - size))):
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise refuse(f"cannot read manifest {path}: {exc.strerror}") from None
    if size > limit:
        raise refuse(f"{path} is larger than {limit} bytes")
    return b"".join(chunks)


def read_manifest(path: str) -> tuple[Path, bytes, str]:
    """(absolute path, bytes, experiment id) of a YAML or JSON manifest."""
    step = "read manifest"
    remedy = "pass the path of the experiment's YAML or JSON manifest"
    if not path or "\x00" in path:
        raise InvalidInput(step, "the manifest path is empty or contains a NUL character", remedy)
    try:
        manifest = Path(path).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        cause = f"cannot resolve the manifest path {path!r}: {exc}"
        raise InvalidInput(step, cause, remedy) from None
    data = _read_manifest_file(manifest, MAX_MANIFEST_BYTES, step, remedy)
    try:
        parsed = yaml.load(data.decode("utf-8"), Loader=_ManifestLoader)  # noqa: S506 - safe
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        text = str(exc).strip() if not isinstance(exc, RecursionError) else "nested too deeply"
        first = text.splitlines()[0][:200] if text else type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        first += f" (line {mark.line + 1})" if mark is not None else ""
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


def resume_command(files: ExperimentFiles, manifest: str, python: str) -> str:
    """The `automl-setup resume` command line that continues this experiment."""
    return shlex.join(
        [
            *("automl-setup", "resume", "--experiment-id", files.experiment_id),
            *("--workspace", str(files.workspace), "--manifest", manifest, "--python", python),
        ]
    )


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
def _unbound_removed_on_failure(files: ExperimentFiles) -> Iterator[None]:
    """Launch made `files.dir` in this call; until the binding exists it holds nothing of
    value, so a failure before then removes it again and the id stays free."""
    try:
        yield
    except BaseException:
        if not files.binding.exists():
            shutil.rmtree(files.dir, ignore_errors=True)
        raise


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


def _engine_script(probe: Probe, record: InstallRecord) -> str:
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


# Runs in the environment's own interpreter (any Python >= 3.8) and does what the console
# script would, without its shebang: a copied venv's scripts still name the original's
# interpreter, so running them could start another environment's engine. The entry point is
# read from that environment's own metadata and only ever imported (never turned into code).
_LAUNCHER = r"""
import re, sys
from importlib import metadata
dist, name = sys.argv[1], sys.argv[2]
try:
    eps = [ep for ep in metadata.distribution(dist).entry_points
           if ep.group == "console_scripts" and ep.name == name]
except metadata.PackageNotFoundError:
    eps = []
dotted = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
if len(eps) != 1 or not re.fullmatch(dotted + ":" + dotted, eps[0].value):
    sys.exit("automl-setup: %s has no console script %r with a plain module:function entry "
             "point in this environment" % (dist, name))
sys.argv = [name] + sys.argv[3:]
sys.exit(eps[0].load()())
"""


def engine_command(interpreter: Path, distribution: str, cli: str, args: list[str]) -> list[str]:
    """argv that runs console script `cli` of `distribution` with `interpreter` (isolated:
    no PYTHONPATH, user site or working directory on its import path)."""
    return [str(interpreter), "-I", "-c", _LAUNCHER, distribution, cli, *args]


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


def _engine_env(prefix: Path, interpreter: Path) -> dict[str, str]:
    """The engine's environment variables: those of its own venv (trials inherit them)."""
    run_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run_env["VIRTUAL_ENV"] = str(prefix)
    run_env["PATH"] = f"{interpreter.parent}{os.pathsep}{run_env.get('PATH', '')}"
    return run_env


def _spawn(
    argv: list[str], env: TargetEnv, log_path: Path, lock_fd: int
) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_engine_env(env.prefix, env.interpreter),
            pass_fds=(lock_fd,),
            start_new_session=True,
        )


def _engine_plan(
    env: TargetEnv, distribution: str, cli: str, manifest: Path, workspace: Path
) -> None:
    """The engine's own read-only `plan` of the manifest, bounded in time and in how much of
    its output is read: a manifest the engine rejects is refused before anything exists (no
    sidecar, binding, ledger or registry entry), so its id stays free."""
    step = "check manifest"
    args = ["plan", "--manifest", str(manifest), "--workspace", str(workspace)]
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(
                engine_command(env.interpreter, distribution, cli, args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # the plan itself can be long; only errors matter
                stderr=errors,
                env=_engine_env(env.prefix, env.interpreter),
                start_new_session=True,
            )
        except OSError as exc:
            raise SetupError(
                step,
                f"the engine could not be run to check the manifest: {exc.strerror}",
                f"run `automl-setup verify --python {env.prefix}`",
            ) from None
        try:
            code = proc.wait(timeout=PLAN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
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
    lines = lines[:PLAN_OUTPUT_LINES] + (["..."] if len(lines) > PLAN_OUTPUT_LINES else [])
    raise SetupError(
        step,
        f"the engine's `{cli} plan` rejects {manifest} (exit {code})",
        "fix the manifest and launch again; nothing was created, the id is still free",
        exit_code=ExitCode.INVALID_INPUT if code == ExitCode.INVALID_INPUT else ExitCode.REFUSED,
        details=lines,
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
            resume = resume_command(files, str(manifest_path), str(env.prefix))
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
    # Shared: launches and resumes of different experiments proceed together; an install or
    # repair (exclusive) is refused while any of them holds it, and refuses them while it runs.
    with shared_lock(store.lock_path, step="launch", holder=f"environment {env.prefix}"):
        record, probe = _verified_record(env, "launch")
        cli = _engine_script(probe, record)
        _engine_plan(env, record.build.distribution, cli, manifest_path, files.workspace)
        try:
            new_directory(files.dir)
        except FileExistsError:
            raise SetupError(
                "launch",
                f"experiment {experiment_id} was launched concurrently by another process",
                "check it with `automl-setup status`, or give this experiment another id",
            ) from None
        with _unbound_removed_on_failure(files), _controller_lock(files) as lock_fd:
            args = ["run", "--manifest", str(manifest_path), "--workspace", str(files.workspace)]
            argv = engine_command(
                env.interpreter, record.build.distribution, cli, [*args, "--approve"]
            )
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
    """The binding of exactly this experiment, or a refusal: read strictly, made for the
    experiment id asked, and with an identity digest that recomputes from the engine fields it
    binds (a binding copied from another experiment or edited by hand proves nothing). Every
    reader (resume, status, listing, the install guard, the MCP provenance check) comes here.
    A binding recorded in another workspace is accepted: the workspace was moved or copied,
    which `relocation` reports and resume judges."""
    step = "read binding"
    remedy = "bindings are never rewritten; restore it from a backup"
    try:
        data = files.binding.read_bytes()
    except FileNotFoundError:
        raise SetupError(
            step,
            f"experiment {files.experiment_id} has no binding ({files.binding} is missing)",
            "only experiments launched by automl-setup can be resumed with proof of the engine",
        ) from None
    except OSError as exc:
        raise SetupError(
            step, f"cannot read the binding {files.binding}: {exc.strerror}", remedy
        ) from None
    binding = load_persisted(Binding, data, what="binding", path=files.binding, remedy=remedy)
    if binding.experiment_id != files.experiment_id:
        raise SetupError(
            step,
            f"the binding {files.binding} belongs to experiment {shown(binding.experiment_id)}"
            f", not {files.experiment_id}",
            f"a binding is never moved between experiments; restore the binding of "
            f"{files.experiment_id} from a backup",
        )
    engine = binding.engine
    if compute_identity_digest(engine.source, engine.build, engine.environment) != (
        engine.identity_digest
    ):
        raise SetupError(
            step,
            f"the identity digest of the binding {files.binding} does not recompute from the "
            "engine fields it binds (the file was edited)",
            remedy,
        )
    return binding


def _recorded_files(binding: Binding, files: ExperimentFiles) -> ExperimentFiles | None:
    """The experiment's files in the workspace its binding records, when that is not the
    workspace asked (the workspace was moved or copied); None when they are the same."""
    if binding.workspace == str(files.workspace):
        return None
    return ExperimentFiles(Path(binding.workspace), files.experiment_id)


def _still_holds(recorded: ExperimentFiles) -> bool:
    """Whether the recorded workspace still holds the experiment (then ours is a copy)."""
    try:
        return recorded.workspace.is_absolute() and recorded.dir.is_dir()
    except (OSError, ValueError):  # a path the OS cannot even look up holds nothing
        return False


def relocation(binding: Binding, files: ExperimentFiles) -> str | None:
    """A note when the experiment was launched in another workspace than `files.workspace`,
    and what that means for its controller lock (which lives in the workspace asked)."""
    recorded = _recorded_files(binding, files)
    if recorded is None:
        return None
    if _still_holds(recorded):
        return (
            f"moved or copied from {recorded.workspace}, which still holds experiment "
            f"{files.experiment_id}: this is a copy with its own controller lock, so two copies "
            "could run at once; resume refuses in the copy"
        )
    return (
        f"moved or copied from {recorded.workspace} (no longer there: a move); its controller "
        f"lock is {files.lock}"
    )


def _refuse_a_copy(binding: Binding, files: ExperimentFiles) -> None:
    """Resume only the one workspace that holds the experiment: in a copy whose original still
    exists, each has its own controller lock and both could run at once."""
    recorded = _recorded_files(binding, files)
    if recorded is None or not _still_holds(recorded):
        return
    raise IdentityRefusal(
        "resume",
        f"{files.workspace} is a copy of {recorded.workspace}, which still holds experiment "
        f"{files.experiment_id}; each copy has its own controller lock, so two copies could "
        "run at once",
        f"resume it where it was launched (--workspace {shlex.quote(str(recorded.workspace))})"
        "; to continue this copy instead, first move the original workspace away",
        [FieldDiff(field="workspace", recorded=binding.workspace, found=str(files.workspace))],
    )


def recreate_commands(binding: Binding, manifest: Path, workspace: Path) -> list[str]:
    """The exact commands that rebuild the recorded engine in a separate environment and
    resume there (in `workspace`, where the experiment is now)."""
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
        "--workspace", str(workspace), "--manifest", str(manifest), "--python", new_env,
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
            f"no experiment {shown(experiment_id)} launched by automl-setup in {files.workspace}",
            f"resume takes an exact id; list them with `automl-setup experiments --workspace "
            f"{files.workspace}`",
        )
    try:
        with _controller_lock(files) as lock_fd:
            binding = read_binding(files)
            _refuse_a_copy(binding, files)
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
    recreate = recreate_commands(binding, Path(manifest).expanduser().resolve(), files.workspace)
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
    with shared_lock(store.lock_path, step="resume", holder=f"environment {env.prefix}"):
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
        cli = _engine_script(probe, record)
        args = ["resume", "--manifest", str(manifest_path), "--workspace", str(files.workspace)]
        argv = engine_command(env.interpreter, record.build.distribution, cli, [*args, "--approve"])
        return _start(files, "resume", argv, env, binding, lock_fd, detach)


# --------------------------------------------------------------------------------------------
# Status


def engine_status(
    binding: Binding, workspace: Path, environment: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """The engine's own `status --json` (read-only) of the experiment in `workspace` (the one
    asked about, never the one the binding recorded: a moved or copied workspace is read where
    it is), run from `environment` (where the experiment last ran) or else from the
    environment it was launched in."""
    engine = binding.engine
    interpreter = Path(environment) / "bin" / "python" if environment else Path(engine.interpreter)
    args = ["status", "--experiment-id", binding.experiment_id]
    args += ["--workspace", str(workspace), "--json"]
    try:
        proc = subprocess.run(
            engine_command(interpreter, engine.build.distribution, engine.cli, args),
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
        data = None
    if not isinstance(data, dict):
        return None, f"the engine's status output is not a JSON object (exit {proc.returncode})"
    if proc.returncode != 0 or "error" in data:
        return None, f"engine status: {data.get('error', proc.stderr.strip()[-200:])}"
    return data, None


def experiment_status(experiment_id: str, workspace: str) -> ExperimentStatus:
    files = ExperimentFiles(_workspace(workspace), validate_experiment_id(experiment_id))
    if not files.dir.is_dir():
        raise SetupError(
            "status",
            f"no experiment {shown(experiment_id)} launched by automl-setup in {files.workspace}",
            f"list experiments with `automl-setup experiments --workspace {files.workspace}`",
            exit_code=ExitCode.NOTHING_INSTALLED,
        )
    binding = read_binding(files)
    attempts = read_json_lines(files.attempts, what="attempts ledger")
    entries = [
        load_persisted(
            AttemptEntry,
            entry,
            what="attempts ledger line",
            path=files.attempts,
            line=number,
            remedy="restore the file from a backup; it is never rewritten automatically",
        )
        for number, entry in enumerate(attempts.entries, start=1)
    ]
    accepted = [e.environment for e in entries if e.outcome == "accepted" and e.environment]
    environment = accepted[-1] if accepted else None
    data, problem = engine_status(binding, files.workspace, environment)
    # After the engine's answer: a "running" it gives for an engine that died since is caught.
    running = lock_is_held(files)
    notes = [problem] if problem else []
    moved = relocation(binding, files)
    if moved:
        notes.append(moved)
    if attempts.torn_line:
        notes.append(f"attempts ledger line {attempts.torn_line} is torn (interrupted write)")
    state = str(data["state"]) if data else ("running" if running else "unknown")
    if state == "running" and not running:
        # The engine holds the controller lock for its whole life, so a free lock proves it
        # is gone, whatever its own files (a killed controller's pid, since reused) say.
        state = "interrupted"
        resume = resume_command(
            files, binding.manifest_path, environment or binding.engine.environment_path
        )
        notes.append(
            "the engine reports running, but no engine process holds the controller lock (it "
            f"was killed); continue it with `{resume}`"
        )
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
        last_attempt=entries[-1] if entries else None,
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
