"""`automl-setup store list | verify | keep | gc --keep-bound WORKSPACE...`: what the wheel
store holds, whether every entry's bytes are intact, keeping an experiment's whole bound closure
(packed from the environment that holds it, so `recreate` needs no index or repository), and
removing the entries no binding in the given workspaces refers to (gc lives with the
experiments: only bindings say what must be kept)."""

from __future__ import annotations

from typing import Literal

from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_server.environment.identity import closure_differences
from mcp_server.environment.memberwheel import keep_members
from mcp_server.environment.target import locate
from mcp_server.environment.wheelstore import WheelEntry, WheelStore
from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.files import SIDECAR, ExperimentFiles, require_experiment
from mcp_server.requests import Request
from mcp_server.scratch import scratch_dir
from mcp_server.values import ExperimentId, TargetPath, WorkspacePath


class StoreRequest(Request):
    action: Literal["list", "verify", "keep", "gc"] = Field(
        description="list the entries, verify each against its hash, keep an experiment's bound "
        "closure, or gc what no binding of keep_bound refers to."
    )
    keep_bound: tuple[WorkspacePath, ...] = Field(
        (),
        description="gc: keep every wheel a binding in these workspaces refers to.",
        json_schema_extra={"max_length": 64},
    )
    experiment_id: ExperimentId | None = Field(
        None, description="keep: the experiment whose bound closure is packed into the store."
    )
    workspace: WorkspacePath | None = Field(None, description="keep: its workspace.")

    @model_validator(mode="after")
    def _arguments_of_the_action(self) -> StoreRequest:
        if (self.action == "gc") != bool(self.keep_bound):
            raise InvalidInput(
                "store",
                "gc needs the workspaces whose bindings it must keep, and only gc takes them",
                "run `automl-setup store gc --keep-bound WORKSPACE...` (every workspace whose "
                "experiments may be resumed)",
            )
        named = (self.experiment_id, self.workspace)
        if (self.action == "keep") != (None not in named) or named.count(None) == 1:
            raise InvalidInput(
                "store",
                "keep needs the experiment and its workspace, and only keep takes them",
                "run `automl-setup store keep --experiment-id ID --workspace WS`",
            )
        return self


class StoreEntryReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str = Field(description="The wheel's sha256 (its name in the store).")
    state: Literal["ok", "damaged", "added", "kept", "removed"] = Field(
        description="ok, damaged (bytes differ from the hash), added, kept or removed."
    )
    wheel_filename: str | None = Field(None, description="The wheel's file name.")
    distribution: str | None = Field(None, description="Its distribution name.")
    version: str | None = Field(None, description="Its version.")
    origin: str | None = Field(
        None, description="Where it came from (built, kept from an environment, ...)."
    )
    commit: str | None = Field(
        None, description="The commit it was built from, for an engine wheel."
    )
    member_of: str | None = Field(
        None, description="For a closure member's wheel: the environment it was packed from."
    )
    problem: str | None = Field(None, description="What is wrong with a damaged entry.")


class StoreReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    root: str = Field(description="The wheel store's folder.")
    action: str = Field(description="What was done: list, verify, keep or gc.")
    entries: list[StoreEntryReport] = Field(
        description="Every entry the action saw, with what became of it."
    )

    @property
    def exit_code(self) -> ExitCode:
        damaged = any(e.state == "damaged" for e in self.entries)
        return ExitCode.REFUSED if damaged else ExitCode.OK


def run_store(request: StoreRequest) -> StoreReport:
    store = WheelStore()
    if request.action == "keep":
        assert request.experiment_id is not None and request.workspace is not None
        entries = _keep(store, ExperimentFiles(request.workspace.path, request.experiment_id))
        return StoreReport(root=str(store.root), action=request.action, entries=entries)
    keep = _bound_wheels(request.keep_bound) if request.action == "gc" else _Bound()
    entries = []
    for sha in store.digests():
        entry, report = _entry(store, sha)
        if request.action == "gc" and entry is not None:
            if keep.holds(entry):
                report = report.model_copy(update={"state": "kept"})
            else:
                store.remove(sha)
                report = report.model_copy(update={"state": "removed"})
        entries.append(report)
    return StoreReport(root=str(store.root), action=request.action, entries=entries)


def _entry(store: WheelStore, sha: str) -> tuple[WheelEntry | None, StoreEntryReport]:
    """One entry, checked once (a damaged one is reported, and gc leaves it for a person)."""
    try:
        entry = store.check(sha).entry
    except SetupError as exc:
        return None, StoreEntryReport(sha256=sha, state="damaged", problem=exc.cause)
    return entry, _report(entry, "ok")


def _report(entry: WheelEntry, state: Literal["ok", "added"]) -> StoreEntryReport:
    commit = entry.source.commit if entry.source else None
    if entry.member is not None and entry.member.direct_url is not None:
        commit = entry.member.direct_url.commit_id
    return StoreEntryReport(
        sha256=entry.sha256,
        state=state,
        wheel_filename=entry.wheel_filename,
        distribution=entry.distribution,
        version=entry.version,
        origin=entry.origin,
        commit=commit,
        member_of=entry.member.environment if entry.member else None,
    )


def _keep(store: WheelStore, files: ExperimentFiles) -> list[StoreEntryReport]:
    """Every member of the experiment's bound closure, packed from the bound environment into
    the store; refused, storing nothing, unless that environment still holds exactly it."""
    step = "store"
    require_experiment(files, step, remedy="keep takes an exact id; list them with")
    binding = read_binding(files)
    bound = binding.engine
    if bound.closure is None:
        raise SetupError(
            step,
            f"the binding of {binding.experiment_id} predates closure recording: it does not "
            "say which dependencies to keep; nothing was stored",
            "only experiments launched since closure recording (binding format 3) have a "
            "closure to keep; recreate installs this one's dependencies from their index",
        )
    env = locate(TargetPath(bound.environment_path))
    probe = env.probe([bound.build.distribution])
    found = probe.closure(bound.build.distribution, bound.extras or [])
    differences = closure_differences(bound.closure, found)
    if differences:
        raise SetupError(
            step,
            f"the environment {env.prefix} no longer holds the closure experiment "
            f"{binding.experiment_id} is bound to ({len(differences)} fields differ); nothing "
            "was stored",
            "keep it from an environment that holds it: `automl-setup recreate` makes one",
            details=[d.describe("bound") for d in differences],
        )
    before = set(store.digests())
    with scratch_dir("automl-setup-keep-") as work:
        kept = keep_members(
            bound.closure, list(bound.closure), [probe.purelib, probe.platlib], env.prefix, work
        )
    return [_report(s.entry, "ok" if s.entry.sha256 in before else "added") for s in kept]


class _Bound:
    """What the bindings of some workspaces refer to: engines' wheels by sha256, closure
    members by name, version and RECORD digest."""

    def __init__(self) -> None:
        self.wheels: set[str] = set()
        self.members: set[tuple[str, str, str | None]] = set()

    def holds(self, entry: WheelEntry) -> bool:
        if entry.member is None:
            return entry.sha256 in self.wheels
        key = (canonicalize_name(entry.distribution), entry.version, entry.member.record_sha256)
        return key in self.members


def _bound_wheels(workspaces: tuple[WorkspacePath, ...]) -> _Bound:
    """What every binding in the workspaces refers to. Any binding that cannot be read
    refuses the whole gc: what it binds is unknown, so nothing may be removed."""
    keep = _Bound()
    for workspace in workspaces:
        root = workspace.path / SIDECAR
        if not root.is_dir():
            raise InvalidInput(
                "store",
                f"{workspace} holds no experiments ({root} is missing); nothing was removed",
                "pass the workspaces that hold the experiments (--keep-bound DIR...)",
            )
        for folder in sorted(root.iterdir()):
            if folder.is_dir():
                files = ExperimentFiles(workspace.path, ExperimentId(folder.name))
                engine = read_binding(files).engine
                keep.wheels.add(engine.build.wheel_sha256)
                keep.members.update(
                    (name, m.version, m.record_sha256) for name, m in (engine.closure or {}).items()
                )
    return keep
