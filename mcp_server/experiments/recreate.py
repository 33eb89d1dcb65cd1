"""`automl-setup recreate`: install exactly the engine an experiment is bound to into a separate
environment, from the wheel store when the bound wheel is there (offline), else by rebuilding
the bound commit (refused unless the rebuilt wheel has the bound sha256), then check it against
the binding field by field, so that `resume --python NEW_ENV` is accepted."""

from __future__ import annotations

import sys
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.children.bound import Watch
from mcp_server.environment.artifact import Artifact, from_store, store_built
from mcp_server.environment.identity import diff_fields
from mcp_server.environment.install import InstallResult, install_artifact, no_progress
from mcp_server.environment.pins import ClosurePolicy, overrides_for
from mcp_server.environment.records import FieldDiff
from mcp_server.environment.target import locate
from mcp_server.environment.transaction import Progress
from mcp_server.environment.wheelstore import WheelStore
from mcp_server.errors import Fix, SetupError
from mcp_server.experiments.binding import (
    Binding,
    binding_differences,
    read_binding,
    resume_command,
)
from mcp_server.experiments.files import ExperimentFiles, require_experiment
from mcp_server.experiments.registered import bound_experiments
from mcp_server.requests import NetworkRequest
from mcp_server.scratch import scratch_dir
from mcp_server.source.gitsource import fetch_commit
from mcp_server.source.profile import EngineProfile
from mcp_server.source.wheelbuild import build_wheel
from mcp_server.values import CommitId, ExperimentId, TargetPath, WorkspacePath

WORK_PREFIX = "automl-setup-recreate-"


class RecreateRequest(NetworkRequest):
    experiment_id: ExperimentId
    workspace: WorkspacePath
    python: TargetPath = Field(description="The separate environment to install the engine into.")
    create_env: bool = Field(False, description="Create the virtual environment if it is missing.")


class RecreateResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(description="The experiment whose engine was recreated.")
    wheel_from: Literal["store", "rebuilt"] = Field(
        description="The bound wheel came from the wheel store, or was rebuilt from the bound "
        "commit (and had the bound sha256)."
    )
    members_from_store: list[str] = Field(
        description="The closure members installed from their wheels in the store."
    )
    members_from_elsewhere: list[str] = Field(
        description="The others, each with where it came from (its index or repository), at "
        "its bound version or commit."
    )
    install: InstallResult = Field(description="The install into the separate environment.")
    resume_command: str = Field(description="The command that resumes the experiment there.")


def recreate_engine(request: RecreateRequest, progress: Progress = no_progress) -> RecreateResult:
    return _recreate(request, progress, Watch.of(request.stall_timeout, progress))


def _recreate(request: RecreateRequest, progress: Progress, watch: Watch) -> RecreateResult:
    files = ExperimentFiles(request.workspace.path, request.experiment_id)
    require_experiment(files, "recreate", remedy="recreate takes an exact id; list them with")
    binding = read_binding(files)
    bound = binding.engine
    stored = WheelStore().find(bound.build.wheel_sha256)  # altered bytes refuse here
    if stored is not None:
        progress("fetch", f"the bound wheel {bound.build.wheel_sha256[:12]} is in the store")
        artifact, wheel_from = from_store(stored, bound.source), "store"
    else:
        artifact, wheel_from = _rebuild(binding, progress, watch), "rebuilt"
    differences = diff_fields(bound.build.model_dump(), artifact.build.model_dump())
    if differences:
        raise _refusal(binding, "the wheel found is not the bound build", differences)
    policy, elsewhere = _closure_policy(binding, progress)
    again = Fix("recreate", (
        ("experiment_id", binding.experiment_id), ("workspace", str(files.workspace)),
        ("python", "NEW"), ("create_env", True),
    ))  # fmt: skip
    try:
        result = install_artifact(
            _profile(binding),
            request.python,
            request.create_env,
            artifact,
            bound.extras or [],  # a binding of format 1 did not record them
            bound_experiments,
            progress,
            policy,
            again=(again,),
            watch=watch,
        )
    except SetupError as exc:
        if not elsewhere or exc.step != "install":
            raise
        raise SetupError(
            "recreate",
            f"{exc.cause}; {len(elsewhere)} members of the bound closure are not in the wheel "
            "store and had to come from their index or repository (below)",
            "make their index or repositories reachable, or keep them in the store while an "
            "environment holds them: automl-setup store keep --experiment-id "
            f"{binding.experiment_id} --workspace WS",
            details=[*elsewhere, *exc.details],
        ) from None
    found = binding_differences(binding, locate(request.python), result.record)
    if found:
        raise _refusal(
            binding,
            f"the bound wheel is installed in {result.record.install.environment}, but the "
            "environment differs from the bound one",
            found,
            remedy="create the environment with the bound Python and dependency versions "
            "(the fields below), then run recreate again"
            + (
                "; this binding (format 1) does not record the engine's extras: if it had "
                "any, install them there with `automl-setup install --extra NAME`"
                if bound.extras is None
                else ""
            ),
        )
    return RecreateResult(
        experiment_id=binding.experiment_id,
        wheel_from=wheel_from,
        members_from_store=[name for name, _origin in policy.from_store],
        members_from_elsewhere=elsewhere,
        install=result,
        resume_command=resume_command(files, binding.manifest_path, str(request.python)),
    )


def _closure_policy(binding: Binding, progress: Progress) -> tuple[ClosurePolicy, list[str]]:
    """Every bound member pinned: from its wheel in the store when there is one, else at its
    bound version or commit (never what a moving branch says today)."""
    closure = binding.engine.closure or {}
    stored = {name: hit.path for name, hit in WheelStore().find_members(closure).items()}
    elsewhere = [
        f"{n} {m.version} from {m.origin()}" for n, m in closure.items() if n not in stored
    ]
    if closure:
        progress(
            "check",
            f"pinning {len(closure)} dependencies as bound: {len(stored)} from the store, "
            f"{len(elsewhere)} from their index or repository",
        )
    policy = ClosurePolicy(
        overrides=overrides_for(closure, stored),
        from_store=tuple((name, closure[name].direct_url) for name in stored),
    )
    return policy, elsewhere


def _rebuild(binding: Binding, progress: Progress, watch: Watch) -> Artifact:
    """Rebuild the bound commit; refused unless its wheel has exactly the bound sha256."""
    src, build = binding.engine.source, binding.engine.build
    store = WheelStore()
    missing = f"the bound wheel sha256 {build.wheel_sha256} is not in the wheel store {store.root}"
    if src is None:
        raise SetupError(
            "recreate",
            f"{missing}, and a reviewed wheel has no source to rebuild it from",
            f"install the reviewed wheel again: automl-setup install --wheel FILE --sha256 "
            f"{build.wheel_sha256} --python NEW_ENV --create-env",
        )
    with scratch_dir(WORK_PREFIX) as work:
        progress("fetch", f"{missing}; rebuilding commit {src.commit[:12]}")
        try:
            profile = _profile(binding)
            commit = CommitId(src.commit)
            dest = work / "src"
            fetched = fetch_commit(profile.repository, commit, profile.subdirectory, dest, watch)
        except SetupError as exc:
            raise SetupError(
                "recreate",
                f"{missing}, and the bound commit {src.commit} cannot be fetched from "
                f"{src.repository} ({exc.cause})",
                f"put the bound wheel back into the store (automl-setup install --wheel FILE "
                f"--sha256 {build.wheel_sha256} ...), or restore the commit in the repository",
                details=exc.details,
            ) from None
        # automl-setup's own interpreter builds: the target may not exist yet, and the sha256
        # comparison below refuses whatever would make the wheel differ.
        wheel = build_wheel(
            fetched.source_dir, work / "dist", src.commit_time, sys.executable, work / "build.log",
            watch,
        )  # fmt: skip
        if wheel.sha256 != build.wheel_sha256:
            raise SetupError(
                "recreate",
                f"{missing}, and rebuilding commit {src.commit[:12]} gave sha256 {wheel.sha256}"
                ": not the bound wheel; nothing was installed",
                "the build is not reproducible here (build backend or tool versions differ); "
                "find the bound wheel and put it into the store",
            )
        return store_built(wheel, src)


def _profile(binding: Binding) -> EngineProfile:
    src, build = binding.engine.source, binding.engine.build
    where = {"repository": src.repository, "subdirectory": src.subdirectory} if src else {}
    return EngineProfile(**where, distribution=build.distribution, requirement=f"=={build.version}")


def _refusal(
    binding: Binding,
    cause: str,
    differences: list[FieldDiff],
    remedy: str = "find the bound wheel and put it into the store",
) -> SetupError:
    return SetupError(
        "recreate",
        f"{cause} (experiment {binding.experiment_id}, {len(differences)} fields differ)",
        remedy,
        details=[d.describe("bound") for d in differences],
    )
