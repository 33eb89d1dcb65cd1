"""`automl-setup store list | verify | gc --keep-bound WORKSPACE...`: what the wheel store
holds, whether every entry's bytes are intact, and removing the entries no binding in the given
workspaces refers to (gc lives with the experiments: only bindings say what must be kept)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_server.environment.wheelstore import WheelStore
from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.files import SIDECAR, ExperimentFiles
from mcp_server.requests import Request
from mcp_server.values import ExperimentId, WorkspacePath


class StoreRequest(Request):
    action: Literal["list", "verify", "gc"]
    keep_bound: tuple[WorkspacePath, ...] = Field(
        (), description="gc: keep every wheel a binding in these workspaces refers to."
    )

    @model_validator(mode="after")
    def _gc_names_workspaces(self) -> StoreRequest:
        if (self.action == "gc") != bool(self.keep_bound):
            raise InvalidInput(
                "store",
                "gc needs the workspaces whose bindings it must keep, and only gc takes them",
                "run `automl-setup store gc --keep-bound WORKSPACE...` (every workspace whose "
                "experiments may be resumed)",
            )
        return self


class StoreEntryReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str
    state: Literal["ok", "damaged", "kept", "removed"]
    wheel_filename: str | None = None
    distribution: str | None = None
    version: str | None = None
    origin: str | None = None
    commit: str | None = None
    problem: str | None = Field(None, description="What is wrong with a damaged entry.")


class StoreReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    root: str
    action: str
    entries: list[StoreEntryReport]

    @property
    def exit_code(self) -> ExitCode:
        damaged = any(e.state == "damaged" for e in self.entries)
        return ExitCode.REFUSED if damaged else ExitCode.OK


def run_store(request: StoreRequest) -> StoreReport:
    store = WheelStore()
    keep = _bound_wheels(request.keep_bound) if request.action == "gc" else set()
    entries = []
    for sha in store.digests():
        report = _entry(store, sha)
        if request.action == "gc" and report.state == "ok":
            if sha in keep:
                report = report.model_copy(update={"state": "kept"})
            else:
                store.remove(sha)
                report = report.model_copy(update={"state": "removed"})
        entries.append(report)
    return StoreReport(root=str(store.root), action=request.action, entries=entries)


def _entry(store: WheelStore, sha: str) -> StoreEntryReport:
    """One entry, checked (a damaged one is reported, and gc leaves it for a person)."""
    try:
        entry = store.check(sha).entry
    except SetupError as exc:
        return StoreEntryReport(sha256=sha, state="damaged", problem=exc.cause)
    return StoreEntryReport(
        sha256=sha,
        state="ok",
        wheel_filename=entry.wheel_filename,
        distribution=entry.distribution,
        version=entry.version,
        origin=entry.origin,
        commit=entry.source.commit if entry.source else None,
    )


def _bound_wheels(workspaces: tuple[WorkspacePath, ...]) -> set[str]:
    """The wheel sha256 of every binding in the workspaces. Any binding that cannot be read
    refuses the whole gc: what it binds is unknown, so nothing may be removed."""
    keep = set()
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
                keep.add(read_binding(files).engine.build.wheel_sha256)
    return keep
