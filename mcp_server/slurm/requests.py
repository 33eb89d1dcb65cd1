"""Request models of the SLURM controller operations (submit, status, cancel), with the rules
for the strings that reach `sbatch`: each one becomes exactly one argv element, never shell text,
and none can replace an option the controller depends on."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from mcp_server.errors import InvalidInput, shown
from mcp_server.requests import Request
from mcp_server.values import ExperimentId, ManifestPath, TargetPath, WorkspacePath

DEFAULT_MAX_ALLOCATIONS = "3"
# Options the controller sets itself: a --sbatch-arg may not replace or undo them.
RESERVED_SBATCH_OPTIONS = frozenset(
    {
        "--requeue", "--no-requeue", "--signal", "--output", "--error", "--chdir",
        "--open-mode", "--parsable", "--wrap", "--export", "--job-name", "--time",
        "--partition", "--array", "--test-only",
    }
)  # fmt: skip


def check_cap(raw: str) -> str:
    """The allocation cap as given (zero padding kept: the engine gets the string unchanged)."""
    if not re.fullmatch(r"[0-9]{1,40}", raw) or int(raw) < 1:
        raise InvalidInput(
            "validate max allocations",
            f"--max-allocations {shown(raw)} is not a decimal number >= 1",
            "pass how many allocations the job may use in all, counting the first (e.g. 3)",
        )
    return raw


class SubmitRequest(Request):
    manifest: ManifestPath
    workspace: WorkspacePath
    python: TargetPath | None
    max_allocations: str = Field(
        DEFAULT_MAX_ALLOCATIONS,
        description="Allocations in all, counting the first (cap 3: generations 0, 1, 2).",
        json_schema_extra={"min_length": 1, "max_length": 40},
    )
    time: str | None = Field(
        None,
        description="SLURM time limit, e.g. 30, 2:00:00, 1-12.",
        json_schema_extra={"max_length": 20},
    )
    partition: str | None = Field(
        None,
        description="SLURM partition (default: the cluster's).",
        json_schema_extra={"max_length": 64},
    )
    sbatch_args: tuple[str, ...] = Field(
        (),
        description="Extra sbatch options, each one `--name` or `--name=value`.",
        json_schema_extra={"max_length": 32, "item_max_length": 200},
    )

    @field_validator("max_allocations")
    @classmethod
    def _cap(cls, value: str) -> str:
        return check_cap(value)

    @field_validator("time")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        pattern = r"[0-9]{1,6}(-[0-9]{1,2})?(:[0-9]{1,2}){0,2}"
        if value is not None and not re.fullmatch(pattern, value):
            raise InvalidInput(
                "validate time limit",
                f"--time {shown(value)} is not a SLURM time limit",
                "pass minutes, H:MM:SS or D-HH (e.g. 30, 2:00:00, 1-12)",
            )
        return value

    @field_validator("partition")
    @classmethod
    def _partition(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", value):
            raise InvalidInput(
                "validate partition",
                f"--partition {shown(value)} is not a partition name",
                "pass a partition `sinfo` lists",
            )
        return value

    @field_validator("sbatch_args")
    @classmethod
    def _sbatch_args(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            match = re.fullmatch(r"(--[a-z][a-z0-9-]*)(=[^\x00-\x1f\x7f]*)?", value)
            if match is None or match.group(1) in RESERVED_SBATCH_OPTIONS:
                raise InvalidInput(
                    "validate sbatch argument",
                    f"--sbatch-arg {shown(value)} is not a long option `--name[=value]` the "
                    "controller leaves to you",
                    "pass options like --sbatch-arg=--mem=4G; the requeue, signal, output, "
                    "time and partition options are set by slurm submit itself",
                )
        return values


class SlurmStatusQuery(Request):
    experiment_id: ExperimentId
    workspace: WorkspacePath


class CancelRequest(Request):
    experiment_id: ExperimentId
    workspace: WorkspacePath
    approve: bool = Field(False, description="The user's yes: cancel the SLURM job.")
