"""The controller batch template (package data `controller.sbatch`) and its rendering.

Every value is substituted shell-quoted (`shlex.quote`), so no path or argument ever becomes
shell text; the engine's command lines are bash arrays whose elements are the binding's argv
byte for byte.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

TEMPLATE = "controller.sbatch"

# The script's own exit codes (docs/slurm.md); the engine's take over once it is exec'd.
EXIT_INVALID = 2  # a malformed variable, or the allocations are exhausted
EXIT_BOOTSTRAP = 70  # helper failed, lock not obtained, gate not runnable, early signal
EXIT_IDENTITY = 78  # this node's environment is not the bound build: never requeued
EX_TEMPFAIL = 75  # what sites map to an automatic requeue: the script never exits with it


@dataclass(frozen=True)
class ControllerValues:
    """What a rendered controller knows of its experiment (all absolute paths)."""

    automl_setup: Path
    experiment_id: str
    workspace: Path
    engine_env: Path
    controller_lock: Path
    max_allocations: str
    run_argv: list[str]
    resume_argv: list[str]


def template_text() -> str:
    return resources.files("mcp_server.slurm").joinpath(TEMPLATE).read_text(encoding="utf-8")


def render(values: ControllerValues) -> str:
    words = {
        "AUTOML_SETUP": shlex.quote(str(values.automl_setup)),
        "EXPERIMENT_ID": shlex.quote(values.experiment_id),
        "WORKSPACE": shlex.quote(str(values.workspace)),
        "ENGINE_ENV": shlex.quote(str(values.engine_env)),
        "CONTROLLER_LOCK": shlex.quote(str(values.controller_lock)),
        "MAX_ALLOCATIONS": shlex.quote(values.max_allocations),
        "RUN_ARGV": " ".join(shlex.quote(a) for a in values.run_argv),
        "RESUME_ARGV": " ".join(shlex.quote(a) for a in values.resume_argv),
    }
    # One pass: a substituted value is never scanned again for placeholders.
    return re.sub(r"@@([A-Z_]+)@@", lambda m: words[m.group(1)], template_text())


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
