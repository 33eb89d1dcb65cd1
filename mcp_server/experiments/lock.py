"""`automl-setup lock`: a PEP 751 `pylock.toml` of the closure an experiment is bound to.

The engine by its stored wheel and sha256; every dependency at its bound version, with the
hashes its index publishes; a VCS dependency at its bound commit. uv resolves the file
(`uv pip compile --format pylock.toml`) with every member pinned by an override, so it carries
the sources and hashes uv itself will install from (`uv pip sync pylock.toml`); the result is
checked against the binding, member by member, before it is written, and a file is written
new only (the same bytes again, or a refusal)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.children.bound import Watch
from mcp_server.children.uv import run_uv, uv_binary
from mcp_server.environment.pins import overrides_for
from mcp_server.environment.wheelstore import WheelStore
from mcp_server.errors import SetupError
from mcp_server.experiments.binding import Binding, read_binding
from mcp_server.experiments.files import ExperimentFiles, require_experiment
from mcp_server.fsutil import atomic_write_bytes, create_new_or_same
from mcp_server.requests import NetworkRequest
from mcp_server.scratch import scratch_dir
from mcp_server.source.profile import tomllib
from mcp_server.values import ExperimentId, LockPath, WorkspacePath

STEP = "lock"
UV_TIMEOUT_S = 900.0


class LockQuery(NetworkRequest):
    experiment_id: ExperimentId
    workspace: WorkspacePath
    out: LockPath | None = Field(
        None,
        description="Where to write it: a new pylock.toml or pylock.<name>.toml (default: "
        "pylock.toml beside the experiment's binding).",
    )


class LockResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    experiment_id: str = Field(description="The experiment whose closure was locked.")
    path: str = Field(description="The pylock.toml written.")
    sha256: str = Field(description="sha256 of the written pylock.toml.")
    written: bool = Field(description="False when the file already held exactly these bytes.")
    packages: int = Field(description="Packages in the lock, the engine included.")
    engine_wheel_sha256: str = Field(description="sha256 of the engine wheel it names.")
    vcs: list[str] = Field(description="Each VCS dependency, as name@commit.")


def _refuse(cause: str, remedy: str, details: list[str] | None = None) -> SetupError:
    return SetupError(STEP, cause, remedy, details=details)


def _compile(binding: Binding, wheel: Path, work: Path, watch: Watch) -> str:
    engine = binding.engine
    requirements, overrides = work / "requirements.in", work / "overrides.txt"
    extras = f"[{','.join(engine.extras)}]" if engine.extras else ""
    atomic_write_bytes(
        requirements, f"{engine.build.distribution}{extras} @ {wheel.as_uri()}\n".encode()
    )
    atomic_write_bytes(overrides, "".join(f"{o}\n" for o in overrides_for(engine.closure)).encode())
    python = ".".join(engine.environment.python_version.split(".")[:2])
    out = work / "pylock.toml"
    argv = [
        uv_binary(), "pip", "compile", "--quiet", "--no-header", "--format", "pylock.toml",
        "--python-version", python, "--override", str(overrides), "--output-file", str(out),
        str(requirements),
    ]  # fmt: skip
    run_uv(
        argv,
        work / "uv-compile.log",
        step=STEP,
        watch=watch,
        cause="uv could not resolve the bound closure (exit {returncode}); nothing written",
        remedy="the index or a repository of a bound dependency must be reachable to lock it",
        timeout=UV_TIMEOUT_S,
    )
    return out.read_text(encoding="utf-8")


def _check(binding: Binding, lock: dict[str, Any]) -> list[str]:
    """Every bound member at its bound version (a VCS one at its commit), the engine by its
    bound wheel: what differs, if anything."""
    engine = binding.engine
    packages = {p["name"]: p for p in lock.get("packages", [])}
    problems = []
    for name, member in (engine.closure or {}).items():
        found = packages.get(name)
        if found is None:
            problems.append(f"{name}: missing from the lock")
            continue
        d = member.direct_url
        if d is not None and d.kind == "vcs":
            commit = (found.get("vcs") or {}).get("commit-id")
            if commit != d.commit_id:
                problems.append(f"{name}: commit {commit}, bound {d.commit_id}")
        elif found.get("version") not in (None, member.version):
            problems.append(f"{name}: version {found.get('version')}, bound {member.version}")
    mine = packages.get(engine.build.distribution, {})
    hashes = [
        source.get("hashes", {}).get("sha256")
        for source in [*mine.get("wheels", []), mine.get("archive") or {}]
    ]
    if engine.build.wheel_sha256 not in hashes:
        problems.append(f"{engine.build.distribution}: not the bound wheel sha256")
    return problems


# The one step of a lock's progress (what uv's resolution waits on, while it waits).
STEPS = (STEP,)


def lock_experiment(
    query: LockQuery, progress: Callable[[str, str], None] | None = None
) -> LockResult:
    return _lock(query, Watch.of(query.stall_timeout, progress))


def _lock(query: LockQuery, watch: Watch) -> LockResult:
    files = ExperimentFiles(query.workspace.path, query.experiment_id)
    require_experiment(files, STEP, remedy="lock takes an exact id; list them with")
    binding = read_binding(files)
    text, lock = bound_lock(binding, watch)
    data = text.encode("utf-8")
    target = query.out.path if query.out is not None else files.dir / "pylock.toml"
    written = _write_new(target, data)
    vcs = [
        f"{n}@{m.direct_url.commit_id}"
        for n, m in (binding.engine.closure or {}).items()
        if m.direct_url is not None and m.direct_url.kind == "vcs"
    ]
    return LockResult(
        experiment_id=binding.experiment_id,
        path=str(target),
        sha256=hashlib.sha256(data).hexdigest(),
        written=written,
        packages=len(lock.get("packages", [])),
        engine_wheel_sha256=binding.engine.build.wheel_sha256,
        vcs=vcs,
    )


def bound_lock(binding: Binding, watch: Watch) -> tuple[str, dict[str, Any]]:
    """The pylock.toml text of the closure `binding` is bound to, checked member by member
    against it (`track` uploads it; `lock` writes it), and the lock it parses to; uv's
    resolution is given up on under `watch`'s stall bound."""
    engine = binding.engine
    if engine.closure is None:
        raise _refuse(
            f"the binding of {binding.experiment_id} predates closure recording: it does not say "
            "which dependencies the engine ran with",
            "only experiments launched since closure recording (binding format 3) can be "
            "locked; this one's engine and direct dependency versions are in its binding "
            "(status, report)",
        )
    stored = WheelStore().find(engine.build.wheel_sha256)  # altered bytes refuse here
    if stored is None:
        raise _refuse(
            f"the bound wheel sha256 {engine.build.wheel_sha256} is not in the wheel store",
            "put it back (automl-setup recreate rebuilds it from the bound commit), then lock",
        )
    with scratch_dir("automl-setup-lock-") as work:
        text = _compile(binding, stored.path, work, watch)
    try:
        lock = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - uv writes TOML
        raise _refuse(f"uv wrote a lock that is not TOML ({exc})", "report this") from None
    problems = _check(binding, lock)
    if problems:
        raise _refuse(
            "the lock uv resolved is not the bound closure; nothing was written",
            "report this with the details",
            details=problems,
        )
    return text, lock


def _write_new(path: Path, data: bytes) -> bool:
    if not path.parent.is_dir():
        raise _refuse(f"the directory of {path} does not exist", "pass --out in an existing one")
    remedy = "pass --out with a new name (pylock.<name>.toml); files are never overwritten"
    return create_new_or_same(path, data, step=STEP, what="this lock", remedy=remedy)
