"""The binding of an experiment to the exact engine build it was launched with: its format, its
strict reading, a moved or copied workspace, and how an environment differs from it."""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from mcp_server.environment.closure import Closure, ClosureMember
from mcp_server.environment.identity import (
    CLOSURE_NOT_RECORDED,
    closure_differences,
    compute_identity_digest,
    diff_fields,
    environment_info,
    identity_fields,
)
from mcp_server.environment.probe import Probe
from mcp_server.environment.records import (
    BuildIdentity,
    EnvironmentInfo,
    FieldDiff,
    InstallRecord,
    SourceIdentity,
)
from mcp_server.environment.target import TargetEnv
from mcp_server.errors import Fix, SetupError, command_line, shown
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.fsutil import read_file
from mcp_server.persisted import Persisted, format_version, load_persisted

# 2 added the engine's extras, 3 its requirement closure.
BINDING_SCHEMA_VERSION: Final = 3


class EngineBindingV1(Persisted):
    identity_digest: str
    source: SourceIdentity | None = Field(description="Null for a reviewed wheel.")
    build: BuildIdentity
    environment: EnvironmentInfo
    environment_path: str = Field(description="sys.prefix of the environment at launch.")
    interpreter: str
    cli: str = Field(description="Console script of the engine that runs the experiment.")


class EngineBindingV2(EngineBindingV1):
    # Not part of the identity (the dependencies they pulled in are); `recreate` installs them.
    extras: list[str] | None = Field(
        description="Extras of the engine installed when it was bound (`install --extra`); "
        "null in a binding of format 1, which did not record them."
    )


class EngineBinding(EngineBindingV2):
    closure: dict[str, ClosureMember] | None = Field(
        description="The engine's requirement closure as it was at launch (part of the "
        "identity); null in a binding of format 1 or 2, which did not record it."
    )


class _BindingFields(Persisted):
    """The fields of every format, in the order a binding file has them (each format narrows
    `schema_version` and `engine`)."""

    schema_version: int
    experiment_id: str
    workspace: str
    manifest_path: str
    manifest_sha256: str
    engine: EngineBindingV1
    argv: list[str] = Field(description="The engine command that launch started.")
    host: str
    time: str
    tool_version: str


class BindingV1(_BindingFields):
    """A binding of format 1 (before extras were recorded): read and upgraded, never written."""

    schema_version: Literal[1]
    engine: EngineBindingV1

    def upgraded(self) -> Binding:
        fields = self.model_dump()
        engine = {"extras": None, **fields.pop("engine"), "closure": None}
        return Binding(
            **{**fields, "schema_version": BINDING_SCHEMA_VERSION}, engine=EngineBinding(**engine)
        )


class BindingV2(BindingV1):
    """A binding of format 2 (before the closure was recorded): read and upgraded."""

    schema_version: Literal[2]  # type: ignore[assignment]
    engine: EngineBindingV2


class Binding(_BindingFields):
    schema_version: Literal[3] = BINDING_SCHEMA_VERSION
    engine: EngineBinding


def read_binding(files: ExperimentFiles) -> Binding:
    """The binding of exactly this experiment, or a refusal: read strictly, made for the
    experiment id asked, and with an identity digest that recomputes from the engine fields it
    binds (a binding copied from another experiment or edited by hand proves nothing). Every
    reader (resume, status, listing, the install guard, the MCP provenance check) comes here.
    A binding recorded in another workspace is accepted: the workspace was moved or copied,
    which `relocation` reports and resume judges."""
    step = "read binding"
    remedy = "bindings are never rewritten; restore it from a backup"
    data = read_file(files.binding)  # never through a link planted at its name
    if data is None:
        raise SetupError(
            step,
            f"experiment {files.experiment_id} has no binding ({files.binding} is missing)",
            "only experiments launched by automl-setup can be resumed with proof of the engine",
        )
    older: dict[object, type[BindingV1]] = {1: BindingV1, 2: BindingV2}
    version = format_version(data)
    if version in older:
        old = load_persisted(
            older[version], data, what="binding", path=files.binding, remedy=remedy
        )
        binding = old.upgraded()
    else:
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
    if compute_identity_digest(engine.source, engine.build, engine.environment, engine.closure) != (
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


def copy_origin(binding: Binding, files: ExperimentFiles) -> ExperimentFiles | None:
    """The experiment's files in the workspace it was launched in, when `files.workspace` is a
    copy of it (the binding records another workspace, which still holds the experiment)."""
    recorded = _recorded_files(binding, files)
    return recorded if recorded is not None and _still_holds(recorded) else None


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


def recreate_fixes(binding: Binding, manifest: Path, workspace: Path) -> list[Fix]:
    """The calls that install the bound engine into a separate environment (`recreate`: from
    the wheel store, or rebuilt from its commit) and resume there (in `workspace`, where the
    experiment is now)."""
    new_env = f"{binding.engine.environment_path}-{binding.engine.build.wheel_sha256[:12]}"
    install = Fix(
        "recreate",
        (
            ("experiment_id", binding.experiment_id),
            ("workspace", str(workspace)),
            ("python", new_env),
            ("create_env", True),
        ),
    )
    resume = Fix(
        "resume",
        (
            ("experiment_id", binding.experiment_id),
            ("workspace", str(workspace)),
            ("manifest", str(manifest)),
            ("python", new_env),
        ),
    )
    return [install, resume]


def recreate_commands(binding: Binding, manifest: Path, workspace: Path) -> list[str]:
    """The exact commands of `recreate_fixes`."""
    return [command_line(fix) for fix in recreate_fixes(binding, manifest, workspace)]


def identity_differences(
    binding: Binding, record: InstallRecord, env_now: EnvironmentInfo, closure_now: Closure
) -> list[FieldDiff]:
    bound = binding.engine
    recorded = identity_fields(bound.source, bound.build, bound.environment)
    found = identity_fields(record.source, record.build, env_now)
    diffs = diff_fields(recorded, found)
    if bound.closure is not None:  # a binding of an older format compares what it has
        diffs += closure_differences(bound.closure, closure_now)
    return diffs


def binding_differences(
    binding: Binding, env: TargetEnv, record: InstallRecord | None, probe: Probe | None = None
) -> list[FieldDiff]:
    """Every identity field where the engine installed in `env` (and the environment as it
    is now, its requirement closure included) differs from the build the experiment is bound
    to."""
    if record is None:
        return [FieldDiff(field="record", recorded=binding.engine.identity_digest, found=None)]
    probe = probe or env.probe([record.build.distribution])
    env_now = environment_info(probe, list(binding.engine.environment.dependencies))
    closure_now = probe.closure(record.build.distribution, binding.engine.extras or [])
    return identity_differences(binding, record, env_now, closure_now)


def binding_notes(binding: Binding) -> list[str]:
    """What a comparison with this binding cannot say (said once, where it is shown)."""
    return [] if binding.engine.closure is not None else [CLOSURE_NOT_RECORDED]


def bound_commit(binding: Binding) -> str | None:
    """The bound commit; None for a reviewed wheel, which has no source."""
    return binding.engine.source.commit if binding.engine.source else None


def resume_fix(files: ExperimentFiles, manifest: str, python: str) -> Fix:
    """The resume call that continues this experiment."""
    return Fix(
        "resume",
        (
            ("experiment_id", files.experiment_id),
            ("workspace", str(files.workspace)),
            ("manifest", manifest),
            ("python", python),
        ),
    )


def resume_command(files: ExperimentFiles, manifest: str, python: str) -> str:
    """The `automl-setup resume` command line that continues this experiment."""
    return command_line(resume_fix(files, manifest, python))
