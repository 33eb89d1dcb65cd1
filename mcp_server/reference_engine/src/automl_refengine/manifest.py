"""The experiment manifest: what to search, what to run per trial, what a trial may see.

Every model forbids unknown keys, takes numbers strictly (no "0.5" strings, no
booleans as integers) and rejects NaN/inf, so a typo fails loudly instead of
silently changing the experiment. YAML and JSON are both accepted; duplicate
keys are rejected in both.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from automl_refengine.errors import InvalidInput

MAX_MANIFEST_BYTES = 1_000_000
_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
PLACEHOLDERS = ("trial_dir", "params_json", "python")


def check_safe_id(value: str) -> str:
    """Experiment ids become directory names, so only a conservative alphabet is allowed."""
    if not _SAFE_ID.fullmatch(value):
        raise ValueError(
            "must be 1-64 characters of letters, digits, '-', '_' or '.', "
            "not starting with '.' or '-'"
        )
    return value


def _check_param_name(value: str) -> str:
    if not _PARAM_NAME.fullmatch(value):
        raise ValueError("parameter names must be identifiers of at most 64 characters")
    return value


def _check_env_name(value: str) -> str:
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not an environment variable name")
    return value


SafeId = Annotated[str, AfterValidator(check_safe_id)]
ParamName = Annotated[str, AfterValidator(_check_param_name)]
EnvName = Annotated[str, AfterValidator(_check_env_name)]
ParamValue = bool | int | float | str


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class FloatParam(_Strict):
    type: Literal["float"]
    low: float
    high: float
    log: bool = False
    # Only grid search discretises a float range; random search rejects the key.
    grid_points: int | None = Field(default=None, ge=2, le=10_000)

    @model_validator(mode="after")
    def _range(self) -> FloatParam:
        if not self.low < self.high:
            raise ValueError("low must be below high")
        if self.log and self.low <= 0:
            raise ValueError("log scale needs low > 0")
        return self


class IntParam(_Strict):
    type: Literal["int"]
    low: int
    high: int
    log: bool = False
    # Grid search takes every integer in [low, high] unless grid_points thins it out.
    grid_points: int | None = Field(default=None, ge=2, le=10_000)

    @model_validator(mode="after")
    def _range(self) -> IntParam:
        if not self.low <= self.high:
            raise ValueError("low must not exceed high")
        if self.log and self.low <= 0:
            raise ValueError("log scale needs low > 0")
        return self


class CategoricalParam(_Strict):
    type: Literal["categorical"]
    choices: list[ParamValue] = Field(min_length=1, max_length=10_000)

    @model_validator(mode="after")
    def _unique(self) -> CategoricalParam:
        # Compare JSON forms so that 1, 1.0 and true stay distinct choices.
        seen = [json.dumps(c) for c in self.choices]
        if len(set(seen)) != len(seen):
            raise ValueError("choices must be unique")
        return self


Parameter = Annotated[FloatParam | IntParam | CategoricalParam, Field(discriminator="type")]


class Objective(_Strict):
    metric: str = Field(min_length=1, max_length=128)
    direction: Literal["minimize", "maximize"]


class Budget(_Strict):
    max_trials: int = Field(ge=1, le=100_000)
    trial_timeout_s: float = Field(gt=0)
    total_timeout_s: float = Field(gt=0)


class Search(_Strict):
    experiment_id: SafeId
    algorithm: Literal["random", "grid"]
    seed: int = Field(ge=0, le=2**63 - 1)
    objective: Objective
    budget: Budget
    parameters: dict[ParamName, Parameter] = Field(min_length=1, max_length=100)

    @model_validator(mode="after")
    def _grid_points(self) -> Search:
        for name, param in self.parameters.items():
            if isinstance(param, CategoricalParam):
                continue
            if self.algorithm == "random" and param.grid_points is not None:
                raise ValueError(f"parameters.{name}.grid_points is only used by algorithm grid")
            if (
                self.algorithm == "grid"
                and isinstance(param, FloatParam)
                and param.grid_points is None
            ):
                raise ValueError(f"parameters.{name} needs grid_points for algorithm grid")
        return self


class Workload(_Strict):
    argv: list[str] = Field(min_length=1, max_length=1000)
    metrics_file: str = "metrics.json"

    @model_validator(mode="after")
    def _check(self) -> Workload:
        if not self.argv[0]:
            raise ValueError("argv[0] must not be empty")
        if any("\0" in arg for arg in [*self.argv, self.metrics_file]):
            raise ValueError("argv and metrics_file must not contain NUL characters")
        for arg in self.argv:
            for name in _PLACEHOLDER.findall(arg):
                if name not in PLACEHOLDERS:
                    known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
                    raise ValueError(f"unknown placeholder {{{name}}} in argv (known: {known})")
        path = PurePosixPath(self.metrics_file)
        if not self.metrics_file or path.is_absolute() or ".." in path.parts or "\\" in str(path):
            raise ValueError("metrics_file must be a relative path inside the trial directory")
        return self


class Execution(_Strict):
    # Names only: the values are read from the controller's environment at launch
    # and never written anywhere.
    pass_env: list[EnvName] = Field(default_factory=list, max_length=100)


class Manifest(_Strict):
    search: Search
    workload: Workload
    execution: Execution = Field(default_factory=Execution)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def manifest_sha256(manifest: Manifest) -> str:
    """Digest of the validated content, so formatting and key order do not matter."""
    return hashlib.sha256(canonical_json(manifest.model_dump(mode="json")).encode()).hexdigest()


def expand_argv(argv: list[str], trial_dir: Path, params_json: Path) -> list[str]:
    """Substitute placeholders in one pass, so substituted text is never re-expanded."""
    values = {
        "trial_dir": str(trial_dir),
        "params_json": str(params_json),
        "python": sys.executable,
    }

    def substitute(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return [_PLACEHOLDER.sub(substitute, arg) for arg in argv]


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of keeping the last."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,  # type: ignore[arg-type]
)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def format_validation_error(error: ValidationError) -> list[str]:
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = "unknown key" if item["type"] == "extra_forbidden" else item["msg"]
        lines.append(f"{where}: {message}")
    return lines


def parse_manifest(data: Any, source: str) -> Manifest:
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        details = "\n  ".join(format_validation_error(exc))
        raise InvalidInput(f"invalid manifest {source}:\n  {details}") from None


def load_manifest(path: Path) -> Manifest:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read manifest {path}: {exc.strerror}") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise InvalidInput(f"manifest {path} is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
        if path.suffix.lower() == ".json":
            data = json.loads(text, object_pairs_hook=_unique_pairs)
        else:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise InvalidInput(f"cannot parse manifest {path}: {exc}") from None
    return parse_manifest(data, str(path))
