"""The project's configuration: which engine a project uses (and optionally its workspace and
target environment), so that every command, the MCP tools and the skills agree on it.

Found like the ecosystem's tools find theirs: from a start directory upward, the first
directory holding `automl-setup.toml`, or a `pyproject.toml` with a `[tool.automl-setup]`
table (a `pyproject.toml` without one is passed over; in one directory the dedicated file
wins). Its keys: an `engine` table (repository, subdirectory, distribution, requirement),
`workspace` and `python` (relative paths are relative to the file's directory), `store`,
`stall-timeout` (seconds a git or uv fetch may go without progress), `index` (the package
index the uvx entry `init` writes installs automl-setup from: bundle/uvindex.py), and a `skills`
table read by `skills check` alone (skills/settings.py; a pyproject table holding only that is
passed over).

Which profile a command uses: a profile file given explicitly (`--profile`, `profile.file`),
else the file named by AUTOML_SETUP_PROFILE, else the project file's `engine`, else the
built-in default; single fields given as flags or arguments win over all of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.children.bound import DEFAULT_STALL_S
from mcp_server.errors import InvalidInput
from mcp_server.source.profile import EngineProfile, ProfileSource, load_profile, tomllib

PROFILE_ENV = "AUTOML_SETUP_PROFILE"
STORE_ENV = "AUTOML_SETUP_STORE"
CONFIG_NAME = "automl-setup.toml"
PYPROJECT_TABLE = "[tool.automl-setup]"
_KEYS = {"engine", "workspace", "python", "store", "stall-timeout", "index", "skills"}
STEP = "project configuration"


@dataclass(frozen=True)
class ProjectFile:
    """The settings of the nearest project file."""

    label: str  # the file, and the table inside a pyproject.toml
    engine: dict[str, Any]
    workspace: Path | None
    python: Path | None
    store: Path | None  # the wheel store (environment/wheelstore.py)
    stall_timeout: (
        float | None
    )  # seconds a network child may go without progress (children/watch.py)
    index: str | None = None  # the uvx entry's package index (init checks it: bundle/uvindex.py)


def find_project_file(start: Path) -> ProjectFile | None:
    """The nearest project file at or above `start`, or None."""
    start = start.absolute()
    for directory in (start, *start.parents):
        dedicated = directory / CONFIG_NAME
        if dedicated.is_file():
            return _settings(dedicated, str(dedicated), _read_toml(dedicated))
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            tool = _read_toml(pyproject).get("tool", {})
            table = tool.get("automl-setup") if isinstance(tool, dict) else None
            # A table of `skills check` settings only says nothing about engines: passed over.
            if table is not None and not (isinstance(table, dict) and set(table) <= {"skills"}):
                label = f"{pyproject} {PYPROJECT_TABLE}"
                return _settings(pyproject, label, table)
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(
            STEP, f"cannot read {path}: {exc}", "fix the file (it must be valid TOML)"
        ) from exc


def _settings(path: Path, label: str, table: Any) -> ProjectFile:
    remedy = (
        f"keep only these keys in {label}: engine (a table), workspace, python, store, "
        "stall-timeout, index, skills"
    )
    if not isinstance(table, dict):
        raise InvalidInput(STEP, f"{label} is not a table", remedy)
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise InvalidInput(STEP, f"{label}: unknown keys {', '.join(unknown)}", remedy)
    engine = table.get("engine", {})
    if not isinstance(engine, dict):
        raise InvalidInput(STEP, f"{label}: engine must be a table", remedy)

    def path_of(key: str) -> Path | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise InvalidInput(STEP, f"{label}: {key} must be a non-empty string", remedy)
        return path.parent / Path(value).expanduser()

    stall = table.get("stall-timeout")
    if stall is not None and (isinstance(stall, bool) or not isinstance(stall, (int, float))):
        raise InvalidInput(STEP, f"{label}: stall-timeout must be a number of seconds", remedy)
    index = table.get("index")
    if index is not None and not isinstance(index, str):
        raise InvalidInput(STEP, f"{label}: index must be a URL (a string)", remedy)
    return ProjectFile(
        label,
        engine,
        path_of("workspace"),
        path_of("python"),
        path_of("store"),
        None if stall is None else float(stall),
        index,
    )


def effective_profile(
    start: Path,
    profile_file: Path | None,
    environ: Mapping[str, str] = os.environ,
    **fields: str | None,
) -> EngineProfile:
    """The profile a command uses, searching the project file from `start`; `fields` are the
    single fields given (None: not given)."""
    if profile_file is not None:
        return load_profile(profile_file, table=None, origin=None, **fields)
    named = environ.get(PROFILE_ENV)
    if named:
        return load_profile(Path(named), table=None, origin=f"{PROFILE_ENV}={named}", **fields)
    project = find_project_file(start)
    if project is not None:
        return load_profile(None, table=project.engine, origin=project.label, **fields)
    return load_profile(None, table=None, origin=None, **fields)


# --------------------------------------------------------------------------------------------
# What `automl-setup config show` prints


class Setting(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: str | None = Field(description="The effective value (null: none).")
    source: str = Field(description="Where it came from.")


class EffectiveSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    start: str = Field(description="The directory the project file is searched from, upward.")
    project_file: str | None = Field(description="The project file found, or null.")
    profile_env: str | None = Field(description=f"The value of {PROFILE_ENV}, if set.")
    engine: ProfileSource
    python: Setting
    workspace: Setting
    store: Setting
    stall_timeout: Setting


def effective_settings(
    start: Path,
    profile_file: Path | None,
    python: str | None,
    workspace: str | None,
    environ: Mapping[str, str] = os.environ,
    **fields: str | None,
) -> EffectiveSettings:
    """Every setting a command would use from `start`, with the given values, and its source."""
    project = find_project_file(start)
    profile = effective_profile(start, profile_file, environ, **fields)
    return EffectiveSettings(
        start=str(start.absolute()),
        project_file=project.label if project else None,
        profile_env=environ.get(PROFILE_ENV) or None,
        engine=profile.source(),
        python=_setting(
            project,
            "python",
            python,
            (environ.get("VIRTUAL_ENV"), "the active virtual environment ($VIRTUAL_ENV)"),
        ),
        workspace=_setting(project, "workspace", workspace, (None, "not set")),
        store=store_setting(project, environ),
        stall_timeout=_setting(project, "stall_timeout", None, (f"{DEFAULT_STALL_S:g}", "default")),
    )


def _setting(
    project: ProjectFile | None, key: str, given: str | None, default: tuple[str | None, str]
) -> Setting:
    """given > the project file's `key` > the default (value, source)."""
    if given is not None:
        return Setting(value=given, source="given")
    value = getattr(project, key) if project is not None else None
    if project is not None and value is not None:
        return Setting(value=str(value), source=project.label)
    return Setting(value=default[0], source=default[1])


def store_setting(project: ProjectFile | None, environ: Mapping[str, str] = os.environ) -> Setting:
    """Where the wheel store is: `$AUTOML_SETUP_STORE` > the project file's `store` >
    `$XDG_CACHE_HOME/automl-setup` (`~/.cache/automl-setup`)."""
    configured = environ.get(STORE_ENV)
    if configured:
        return Setting(value=str(Path(configured).expanduser().absolute()), source=STORE_ENV)
    if project is not None and project.store is not None:
        return Setting(value=str(project.store.absolute()), source=project.label)
    cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return Setting(value=str(cache.absolute() / "automl-setup"), source="default")


def project_stall_timeout(start: Path, given: float | None) -> float | None:
    """`given`, else the project file's stall-timeout, else None (the default bound)."""
    if given is not None:
        return given
    project = find_project_file(start)
    return project.stall_timeout if project is not None else None


def project_path(start: Path, given: str | None, key: str) -> str | None:
    """`given`, else the project file's `key` (workspace or python), else None."""
    project = find_project_file(start) if given is None else None
    return _setting(project, key, given, (None, "")).value
