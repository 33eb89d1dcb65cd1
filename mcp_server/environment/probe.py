"""Probing an interpreter: the stdlib-only script target_side/probe.py run in it in isolated mode
(`-I`), and its answer read strictly, so what is reported is what that environment itself sees.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from mcp_server.children.run import process_failure, run_checked
from mcp_server.environment.closure import Closure, read_closure
from mcp_server.errors import SetupError
from mcp_server.persisted import describe_error
from mcp_server.target_side import command

WATCHED_PACKAGES = ("gepa", "torch")


def _absolute(value: Path) -> Path:
    if not value.is_absolute():
        raise ValueError(f"{str(value)!r} is not an absolute path")
    return value


AbsolutePath = Annotated[Path, AfterValidator(_absolute)]


class _Answer(BaseModel):
    """The probe's answer is checked for shape and types: a program that is not the Python
    the probe expects must be refused, not read with a KeyError waiting to happen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class InstalledDist(_Answer):
    name: str
    version: str
    dist_info: Path | None
    direct_url: str | None
    installer: str | None
    requires: tuple[str, ...]
    console_scripts: tuple[str, ...]


class Probe(_Answer):
    executable: str
    prefix: AbsolutePath
    base_prefix: str
    purelib: AbsolutePath
    platlib: AbsolutePath
    markers: dict[str, str]  # the marker environment (PEP 508) of this interpreter
    scripts: AbsolutePath
    python_version: str
    implementation: str
    platform: str
    dists: dict[str, InstalledDist | None]
    modules: dict[str, bool]
    versions: dict[str, str]  # canonical name -> version, every distribution in the environment
    torch_cuda: str | None

    def closure(self, distribution: str, extras: list[str]) -> Closure:
        """The installed requirement closure of `distribution` with `extras` (closure.py)."""
        dist = self.dists.get(distribution)
        requires = list(dist.requires) if dist is not None else []
        folders = [self.purelib, self.platlib]
        return read_closure(folders, self.markers, distribution, requires, extras)

    @property
    def is_venv(self) -> bool:
        return str(self.prefix) != self.base_prefix


def probe_interpreter(
    interpreter: Path, dists: list[str], modules: list[str] | None = None
) -> Probe:
    """What `interpreter` itself sees: its paths, platform, the distributions `dists` (None
    when absent), whether `modules` import, and every installed version."""
    argv = command(interpreter, "probe", json.dumps({"dists": dists, "modules": modules or []}))
    try:
        out = run_checked(argv)
    except (subprocess.SubprocessError, OSError) as exc:
        raise SetupError(
            "inspect environment",
            f"the interpreter {interpreter} could not be inspected ({process_failure(exc)})",
            "the target must be Python 3.8 or newer; pass --python pointing at one",
        ) from None
    try:
        return Probe.model_validate_json(out.stdout)
    except ValidationError as exc:
        raise SetupError(
            "inspect environment",
            f"{interpreter} is not a Python interpreter automl-setup can use: its "
            f"answer to the probe is malformed ({describe_error(exc)})",
            "pass --python pointing at a working Python 3.8+ interpreter or venv",
        ) from None
