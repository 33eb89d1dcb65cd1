"""The target environment: which interpreter, and the environment (sys.prefix) it belongs to.

Located from a path (an interpreter or a venv directory) or $VIRTUAL_ENV; broken venvs and
automl-setup's own environment are refused before anything is written. What is installed in it
is read by `probe_interpreter`, through `TargetEnv.probe`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mcp_server.children.run import process_failure, run_checked
from mcp_server.environment.probe import Probe, probe_interpreter
from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.fsutil import STATE_DIR_NAME, exclusive_holder, locked_directory
from mcp_server.target_side import command
from mcp_server.values import TargetPath

LOCK_NAME = "lock"  # <state dir>/lock: the environment lock (RecordStore.lock_path)


@dataclass(frozen=True)
class TargetEnv:
    """A located interpreter and the environment (sys.prefix) it belongs to."""

    interpreter: Path
    prefix: Path
    created: Path | None = None  # the new venv this very call made (--create-env), if any

    @property
    def state_dir(self) -> Path:
        return self.prefix / STATE_DIR_NAME

    @property
    def lock_path(self) -> Path:
        return self.state_dir / LOCK_NAME

    def probe(self, dists: list[str], modules: list[str] | None = None) -> Probe:
        return probe_interpreter(self.interpreter, dists, modules)


VENV_INTERPRETERS = ("bin/python", "bin/python3", "Scripts/python.exe")
BROKEN_REMEDY = (
    "automl-setup never replaces an existing environment: recreate it yourself (remove it, "
    "then install with --python PATH --create-env) or pass another --python"
)
OWN_ENV_REMEDY = (
    "installing the engine there would let the engine's dependencies change automl-setup "
    "itself; pass --python of a separate venv (add --create-env to make a new one)"
)


def requested_target(python: TargetPath | None) -> tuple[Path, str]:
    """The target path as given (PATH, else VIRTUAL_ENV) and a note naming where it came from.
    `TargetPath(x)` is free for a value that is one already; a plain string is checked."""
    if python is not None:
        return TargetPath(python).path, ""
    raw = os.environ.get("VIRTUAL_ENV")
    if not raw:
        raise InvalidInput(
            "locate environment",
            "no target environment given",
            "pass --python PATH (an interpreter or a venv directory) or activate a venv",
        )
    return TargetPath(raw).path, " ($VIRTUAL_ENV)"


def locate(python: TargetPath | None) -> TargetEnv:
    """PATH (interpreter or venv directory), or VIRTUAL_ENV when PATH is not given; read-only
    (automl-setup's own environment may be read: nothing is written by locating it)."""
    return _existing(*requested_target(python))


def locate_for_change(python: TargetPath | None) -> TargetEnv:
    """`locate` for commands that write into the environment: automl-setup's own is refused,
    and so is one another automl-setup process holds (it may be creating it right now)."""
    return existing_for_change(*requested_target(python))


def existing_for_change(path: Path, origin: str) -> TargetEnv:
    """The existing environment at `path` (from `requested_target`), refused when in use or
    automl-setup's own."""
    _refuse_in_use(path)
    return _refuse_own(_existing(path, origin), origin)


def _existing(path: Path, origin: str) -> TargetEnv:
    step = "locate environment"
    if not os.path.lexists(path):
        raise SetupError(
            step,
            f"{path}{origin} does not exist",
            "check the path; `automl-setup install --create-env` creates a new environment",
            exit_code=ExitCode.NOTHING_INSTALLED,
        )
    interpreter = venv_interpreter(path) if path.is_dir() else path
    if not interpreter.exists():  # a dangling symlink: lexists, but nothing to run
        venv = interpreter.parent.parent
        broken = (
            f"{venv} is a broken virtual environment"
            if (venv / "pyvenv.cfg").is_file()
            else f"{interpreter} is broken"
        )
        raise SetupError(
            step,
            f"{broken}: {interpreter} points at {interpreter.readlink()}, which does not exist",
            BROKEN_REMEDY,
        )
    if not os.access(interpreter, os.X_OK) or interpreter.is_dir():
        raise InvalidInput(
            step,
            f"{interpreter} is not an executable interpreter",
            "pass --python pointing at a Python interpreter or a virtual environment",
        )
    prefix = prefix_of(interpreter)
    if path.is_dir() and not prefix.samefile(path):
        # e.g. pyvenv.cfg gone: the interpreter runs as its base Python, whose files are not
        # this directory's; installing "there" would change that other environment.
        raise SetupError(
            step,
            f"{path} is a broken virtual environment: its {interpreter.name} reports sys.prefix "
            f"{prefix}, not {path}",
            BROKEN_REMEDY,
        )
    return TargetEnv(interpreter=interpreter, prefix=prefix)


def venv_interpreter(directory: Path) -> Path:
    found = _interpreter_in(directory)
    if found is not None:
        return found
    step = "locate environment"
    if (directory / "pyvenv.cfg").is_file():
        raise SetupError(
            step,
            f"{directory} is a broken virtual environment: it has no bin/python",
            BROKEN_REMEDY,
        )
    # Perhaps a venv another automl-setup call is making right now, or one it began and never
    # finished: that is said, never "not a virtual environment".
    holder = _creating(directory)
    found = _interpreter_in(directory)  # made meanwhile, while this call waited
    if found is not None:
        return found
    if holder is not None and holder != f"pid {os.getpid()}":
        raise _in_use(directory, holder)
    if _abandoned_claim(directory):
        raise SetupError(
            step,
            f"{directory} was claimed by an automl-setup --create-env that did not finish (it "
            "holds no interpreter, only automl-setup's lock, and no process holds that)",
            f"remove it (rm -r {shlex.quote(str(directory))}), then run the command again with "
            "--create-env",
        )
    raise InvalidInput(
        step,
        f"{directory} is a directory but not a virtual environment (no bin/python); "
        "nothing in it was touched",
        "pass a venv directory or an interpreter, or a path that does not exist yet with "
        "--create-env",
    )


def _interpreter_in(directory: Path) -> Path | None:
    for candidate in VENV_INTERPRETERS:
        if os.path.lexists(directory / candidate):
            return directory / candidate
    return None


def _abandoned_claim(directory: Path) -> bool:
    """Nothing in `directory` but the lock `--create-env` takes first (create.py)."""
    state = directory / STATE_DIR_NAME
    try:
        return [p.name for p in directory.iterdir()] == [STATE_DIR_NAME] and [
            p.name for p in state.iterdir()
        ] == [LOCK_NAME]
    except OSError:
        return False


def _refuse_in_use(path: Path) -> None:
    """Before running anything in it: a venv whose lock is held may be half made by a
    concurrent --create-env (its interpreter could even report the base Python's prefix)."""
    venv = path if path.is_dir() else path.parent.parent
    holder = _creating(venv)
    if holder is not None:
        raise _in_use(venv, holder)


def _in_use(venv: Path, holder: str) -> SetupError:
    return SetupError(
        "locate environment",
        f"environment {venv} is in use by another automl-setup process ({holder}); it may "
        "be creating this environment concurrently",
        "wait for it to finish, then run the command again",
    )


def _creating(venv: Path) -> str | None:
    """Who holds the environment lock of `venv` (its pid text), or None; never creates it.

    A `--create-env` makes the folder and takes its lock in one step under an exclusive flock
    of the parent (create.py), so the lock is read under a shared flock of the parent: a folder
    made an instant ago is never seen without its lock."""
    try:
        with locked_directory(venv.parent, shared=True):  # waits for a mkdir and a lock only
            return _lock_holder(venv / STATE_DIR_NAME / LOCK_NAME)
    except SetupError:  # the parent cannot be opened: read the lock without waiting
        return _lock_holder(venv / STATE_DIR_NAME / LOCK_NAME)


def _lock_holder(lock: Path) -> str | None:
    try:
        return exclusive_holder(lock)
    except SetupError:  # not ours to read: nobody we know holds it
        return None


def _refuse_own(env: TargetEnv, origin: str) -> TargetEnv:
    own = Path(sys.prefix)
    if env.prefix == own or (own.exists() and env.prefix.exists() and env.prefix.samefile(own)):
        raise InvalidInput(
            "locate environment",
            f"{env.prefix}{origin} is automl-setup's own environment (the one it runs from)",
            OWN_ENV_REMEDY,
        )
    return env


def prefix_of(interpreter: Path) -> Path:
    step = "locate environment"
    remedy = "pass --python pointing at a working Python 3 interpreter or venv"
    try:
        out = run_checked(command(interpreter, "prefix"))
    except (subprocess.SubprocessError, OSError) as exc:
        raise InvalidInput(
            step,
            f"{interpreter} does not run as a Python interpreter ({process_failure(exc)}); "
            "it is not a Python interpreter automl-setup can use",
            remedy,
        ) from None
    # An empty or relative answer would make the working directory the environment.
    answer = out.stdout.strip()
    prefix = Path(answer)
    if not answer or "\n" in answer or not prefix.is_absolute() or not prefix.is_dir():
        shown = repr(answer[:80]) if answer else "nothing"
        raise InvalidInput(
            step,
            f"{interpreter} is not a Python interpreter: asked for sys.prefix it answered "
            f"{shown}, not an existing absolute directory",
            remedy,
        )
    return prefix
