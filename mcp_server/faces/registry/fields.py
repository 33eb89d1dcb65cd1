"""What a request's fields are, for both faces: each field's description (its own, else its value
type's), whether it is optional or repeatable, and the bounds its value type publishes (the value
types check the content; the bounds keep a tool's schema honest about the length it takes). The
command line's flags (`faces/cli/flags.py`) and the MCP tools' arguments (`faces/mcp/tools.py`)
are both made from these, so a field is described once.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from mcp_server.errors import InvalidInput
from mcp_server.selectors import ClosureMemberSpec, HexPrefix, TrackingUri
from mcp_server.source.profile import EngineProfile
from mcp_server.values import (
    MAX_BRANCH_LENGTH,
    MAX_CURSOR_LENGTH,
    MAX_ID_LENGTH,
    MAX_PATH_LENGTH,
    BranchName,
    CommitId,
    ExperimentId,
    ExtraName,
    JobId,
    LockPath,
    ManifestPath,
    PageCursor,
    ReportPath,
    TargetPath,
    WheelPath,
    WheelSha256,
    WorkspacePath,
)


@dataclass(frozen=True)
class Kind:
    """A value type as the faces present it."""

    description: str
    max_length: int
    min_length: int = 1
    path: bool = False  # confined by an MCP client's roots


KINDS: dict[type, Kind] = {
    TargetPath: Kind(
        "Target Python interpreter or virtual-environment directory.", MAX_PATH_LENGTH, path=True
    ),
    WorkspacePath: Kind("Directory that holds the experiments.", MAX_PATH_LENGTH, path=True),
    ManifestPath: Kind("Experiment manifest, YAML or JSON.", MAX_PATH_LENGTH, path=True),
    ReportPath: Kind("A new .html file for the report.", MAX_PATH_LENGTH, path=True),
    LockPath: Kind(
        "A new pylock.toml (or pylock.<name>.toml) for the lock.", MAX_PATH_LENGTH, path=True
    ),
    WheelPath: Kind("A reviewed wheel file (.whl) to install exactly.", MAX_PATH_LENGTH, path=True),
    WheelSha256: Kind("The reviewed wheel's sha256 (hex), recorded at the review.", 64, 64),
    BranchName: Kind(
        "Branch name exactly as the repository has it: 'main' or a development branch such as "
        "'dev/feature'. Never guess it: ask the user.",
        MAX_BRANCH_LENGTH,
    ),
    CommitId: Kind("Full commit id.", 64),
    ExperimentId: Kind(
        "Exact experiment id (search.experiment_id of its manifest).", MAX_ID_LENGTH
    ),
    ExtraName: Kind("Engine extra.", 64),
    JobId: Kind("The SLURM job id sbatch printed.", 31),
    PageCursor: Kind(
        "Where the next page starts: the next_cursor of the previous page, unchanged.",
        MAX_CURSOR_LENGTH,
    ),
    HexPrefix: Kind("The start of a commit id or digest: 4 to 64 hex digits.", 64, 4),
    ClosureMemberSpec: Kind("A distribution of the bound closure: NAME or NAME==VERSION.", 200),
    TrackingUri: Kind("An MLflow tracking server: http(s)://HOST[:PORT][/PATH].", 500),
}


@dataclass(frozen=True)
class FieldShape:
    """One request field: its name, the type of one value, and how it is given."""

    name: str
    value: Any  # the type of one value: a value type, bool, int, float, str, a Literal
    optional: bool  # None is allowed (the default)
    repeated: bool  # a tuple of values
    required: bool  # the request has no default for it
    default: Any
    description: str
    info: FieldInfo

    @property
    def kind(self) -> Kind | None:
        return KINDS.get(self.value)

    @property
    def choices(self) -> tuple[Any, ...] | None:
        return typing.get_args(self.value) if typing.get_origin(self.value) is Literal else None

    @property
    def is_profile(self) -> bool:
        return self.value is EngineProfile


def unwrap(annotation: Any) -> tuple[Any, bool, bool]:
    """(type of one value, optional, repeated) of a field's annotation."""
    optional = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        (annotation,) = args
    if typing.get_origin(annotation) is tuple:
        return typing.get_args(annotation)[0], optional, True
    return annotation, optional, False


def shapes(model: type[BaseModel]) -> list[FieldShape]:
    """Every field of a request, in its order."""
    found = []
    for name, info in model.model_fields.items():
        value, optional, repeated = unwrap(info.annotation)
        kind = KINDS.get(value)
        description = info.description or (kind.description if kind else "")
        if not description and value is not EngineProfile:
            raise TypeError(f"{model.__name__}.{name}: no description (the field's or its type's)")
        required = info.is_required()
        default = None if required else info.get_default(call_default_factory=True)
        found.append(
            FieldShape(name, value, optional, repeated, required, default, description, info)
        )
    return found


def build_request(model: type[BaseModel], fields: dict[str, Any]) -> BaseModel:
    """The request, or a refusal naming what does not fit a field's bounds (the value types
    refuse with their own message; pydantic's own checks end here, never as a crash)."""
    try:
        return model(**fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInput(
            "validate", problems, "pass values within the bounds `--help` gives"
        ) from None
