"""EngineProfile: which engine to install (repository, subdirectory, distribution, requirement).

Precedence: single fields given as flags win over the profile underneath them: a TOML profile
file, or what `source/config.py` finds (AUTOML_SETUP_PROFILE, the project file), or the default.
Every profile knows where it came from (`origin`), so every result can say so.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from mcp_server.errors import InvalidInput
from mcp_server.values import RepositoryUrl, Subdirectory

if sys.version_info >= (3, 11):
    import tomllib as tomllib  # re-exported: the modules that read TOML take it from here
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_REPOSITORY = "https://github.com/NVIDIA-TAO/tao-automl"
DEFAULT_SUBDIRECTORY = "packages/automl-core"
DEFAULT_DISTRIBUTION = "nvidia-automl-core"
DEFAULT_REQUIREMENT = "==0.1.0"

# The separately published application that is often mistaken for the core.
CONFUSABLE_DISTRIBUTIONS = {"nvidia-tao-automl": "tao_automl"}
CORE_IMPORT_NAME = "automl_core"
DEFAULT_ORIGIN = "built-in default"


def confusable_note(distribution: str) -> str:
    """Why a confusable distribution is not the core ('' for any other name)."""
    module = CONFUSABLE_DISTRIBUTIONS.get(canonicalize_name(distribution))
    if module is None:
        return ""
    return (
        f"{distribution} (import {module}) is the separately published application, not the "
        f"core (import {CORE_IMPORT_NAME})"
    )


class ProfileSource(BaseModel):
    """Which engine a command used and where that choice came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    distribution: str = Field(
        description=(
            "Where the distribution name came from (a flag, the profile file, the project "
            "file, the default)."
        ),
    )
    repository: str = Field(description="Repository URL, credentials stripped.")
    subdirectory: str = Field(description="Where the subdirectory came from.")
    requirement: str = Field(description="Where the version requirement came from.")
    source: str = Field(
        description="Where the profile came from: fields given by flags or arguments, a profile "
        "file, AUTOML_SETUP_PROFILE, a project file, or the built-in default."
    )

    def describe(self) -> str:
        return f"engine: {self.distribution} from {self.repository} ({self.source})"


class EngineProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Checked by their value types (a bad one refuses with its own step, cause and remedy).
    repository: RepositoryUrl = RepositoryUrl(DEFAULT_REPOSITORY)
    subdirectory: Subdirectory = Subdirectory(DEFAULT_SUBDIRECTORY)
    distribution: str = DEFAULT_DISTRIBUTION
    requirement: str = DEFAULT_REQUIREMENT
    # Not a field: where the values came from says nothing about which engine it is.
    _origin: str | None = PrivateAttr(None)

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

    @property
    def origin(self) -> str:
        """Where the values came from; a profile built directly: the default, or "given"."""
        if self._origin is not None:
            return self._origin
        return DEFAULT_ORIGIN if not self.flags() else "given"

    def with_origin(self, origin: str) -> EngineProfile:
        """The same profile, said to come from `origin`."""
        copy = self.model_copy()
        copy._origin = origin
        return copy

    def source(self) -> ProfileSource:
        return ProfileSource(
            distribution=self.distribution,
            repository=str(self.repository),
            subdirectory=self.subdirectory,
            requirement=self.requirement,
            source=self.origin,
        )

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


def load_profile(
    path: Path | None = None,
    *,
    table: dict[str, Any] | None = None,
    origin: str | None = None,
    **overrides: str | None,
) -> EngineProfile:
    """Default <- a TOML file at `path` (table-less keys, or an [engine] table) or an already
    read `table` <- non-None overrides. `origin` names where the file or table came from."""
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
    values.update(table or {})
    given = {k: v for k, v in overrides.items() if v is not None}
    values.update(given)
    try:
        profile = EngineProfile(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'profile'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )
        where = f" (profile from {origin or path})" if origin or path else ""
        raise InvalidInput(
            "profile", problems + where, "fix the profile file or flag (see docs/setup.md)"
        ) from None
    if origin is None and path is None and not given:
        return profile  # the default, as EngineProfile() is
    base = origin or (f"profile file {path}" if path is not None else DEFAULT_ORIGIN)
    return profile.with_origin(f"{', '.join(given)} given, over {base}" if given else base)
