"""EngineProfile: which engine to install (repository, subdirectory, distribution, requirement).

Precedence: command-line flags win over a TOML profile file, which wins over the default.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from mcp_server.errors import InvalidInput
from mcp_server.values import RepositoryUrl, Subdirectory

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_REPOSITORY = "https://github.com/NVIDIA-TAO/tao-automl"
DEFAULT_SUBDIRECTORY = "packages/automl-core"
DEFAULT_DISTRIBUTION = "nvidia-automl-core"
DEFAULT_REQUIREMENT = "==0.1.0"

# The separately published application that is often mistaken for the core.
CONFUSABLE_DISTRIBUTIONS = {"nvidia-tao-automl": "tao_automl"}
CORE_IMPORT_NAME = "automl_core"


class EngineProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Checked by their value types (a bad one refuses with its own step, cause and remedy).
    repository: RepositoryUrl = RepositoryUrl(DEFAULT_REPOSITORY)
    subdirectory: Subdirectory = Subdirectory(DEFAULT_SUBDIRECTORY)
    distribution: str = DEFAULT_DISTRIBUTION
    requirement: str = DEFAULT_REQUIREMENT

    @field_validator("distribution")
    @classmethod
    def _distribution(cls, value: str) -> str:
        try:
            req = Requirement(value)
        except InvalidRequirement as exc:
            raise ValueError(f"not a distribution name: {value!r}") from exc
        if str(req) != value or req.specifier or req.extras or req.marker or req.url:
            raise ValueError(f"a bare distribution name is expected, not {value!r}")
        return value

    @field_validator("requirement")
    @classmethod
    def _requirement(cls, value: str) -> str:
        try:
            SpecifierSet(value)
        except InvalidSpecifier as exc:
            raise ValueError(f"not a version specifier (like '==0.1.0'): {value!r}") from exc
        return value

    @property
    def canonical_distribution(self) -> str:
        return canonicalize_name(self.distribution)

    def flags(self) -> list[str]:
        """The command-line flags that reproduce this profile where it differs from the default."""
        out: list[str] = []
        for field, flag in _FLAG_FIELDS.items():
            value = getattr(self, field)
            if value != EngineProfile.model_fields[field].default:
                out += [flag, value]
        return out


_FLAG_FIELDS = {
    "repository": "--repository",
    "subdirectory": "--subdirectory",
    "distribution": "--distribution",
    "requirement": "--requirement",
}


def load_profile(path: Path | None = None, **overrides: str | None) -> EngineProfile:
    """Default <- TOML file (table-less keys, or an [engine] table) <- non-None overrides."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise InvalidInput(
                "profile", f"cannot read profile file {path}: {exc}", "pass a readable TOML file"
            ) from exc
        if "engine" in data:
            extra = sorted(k for k in data if k != "engine")
            if not isinstance(data["engine"], dict) or extra:
                raise InvalidInput(
                    "profile",
                    f"{path}: with an [engine] table, everything must be inside it"
                    + (f" (found outside: {', '.join(extra)})" if extra else ""),
                    "put repository, subdirectory, distribution, requirement under [engine]",
                )
            data = data["engine"]
        values.update(data)
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return EngineProfile(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'profile'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )
        raise InvalidInput(
            "profile", problems, "fix the profile file or flag (see docs/setup.md)"
        ) from None
