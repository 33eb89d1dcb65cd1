"""Opening the install target, and claiming a new venv for it (`--create-env`).

A new venv is claimed before anyone else can see it: its environment lock is taken the moment
its folder exists, and a failure removes exactly the folders this call made.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from mcp_server.children.run import process_failure, run_checked
from mcp_server.children.uv import uv_binary
from mcp_server.environment.target import (
    LOCK_NAME,
    TargetEnv,
    existing_for_change,
    prefix_of,
    requested_target,
    venv_interpreter,
)
from mcp_server.errors import SetupError
from mcp_server.fsutil import (
    STATE_DIR_NAME,
    exclusive_lock,
    locked_directory,
    storage_cause,
    storage_remedy,
)
from mcp_server.values import TargetPath


@contextlib.contextmanager
def open_for_install(python: TargetPath | None, *, create: bool) -> Iterator[TargetEnv]:
    """The install target with its environment lock held for the duration. With `create`, a
    path that does not exist yet becomes a new venv, claimed before anyone else can see it: the
    lock is taken before the venv is usable, so a concurrent install refuses "in use", and if
    the body fails, only what this call made is removed again."""
    path, origin = requested_target(python)
    with contextlib.ExitStack() as stack:
        env = None
        if create and not os.path.lexists(path):
            # `NEW/bin/python` names the interpreter of a venv to create at NEW.
            if path.parent.name in ("bin", "Scripts") and path.name.startswith("python"):
                path = path.parent.parent
            env = _claim_new(path, stack)
        if env is None:
            env = existing_for_change(path, origin)
            stack.enter_context(
                exclusive_lock(env.lock_path, step="install", holder=f"environment {env.prefix}")
            )
        yield env


def _claim_new(path: Path, stack: contextlib.ExitStack) -> TargetEnv | None:
    """Create the venv `path` for this call, holding its environment lock from the moment the
    folder exists; None when another process made `path` first (the caller then treats it as
    an existing environment: in use, or not one). Under `stack` on return: the lock, and the
    removal of every folder this call made should the caller's body fail."""
    made = _make_parents(path.parent)
    # The parent's flock makes "folder made + lock taken" one step for every automl-setup
    # process: nobody sees the new folder without its lock held (target.py reads the lock under
    # a shared flock of the parent). Held only for a mkdir and a lock: never long.
    with _remove_on_failure(made), locked_directory(path.parent):
        try:
            path.mkdir()
        except FileExistsError:
            return None
        except OSError as exc:
            raise _cannot_create(path, exc) from None
        made.append(path)
        stack.enter_context(
            exclusive_lock(path / STATE_DIR_NAME / LOCK_NAME, step="install",
                           holder=f"environment {path}")
        )  # fmt: skip
    # Entered after the lock, so it runs before the lock is released: nobody can take the
    # environment between our failure and its removal.
    stack.enter_context(_remove_on_failure(made))
    _create_venv(path)
    interpreter = venv_interpreter(path)
    return TargetEnv(interpreter=interpreter, prefix=prefix_of(interpreter), created=path)


def _make_parents(directory: Path) -> list[Path]:
    """mkdir -p, returning exactly the folders this call made (outermost first); a folder
    another process makes at the same moment is theirs, not ours."""
    missing: list[Path] = []
    while not os.path.lexists(directory):
        missing.append(directory)
        directory = directory.parent
    made: list[Path] = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            _remove_made(made)
            raise _cannot_create(folder, exc) from None
        made.append(folder)
    return made


def _cannot_create(path: Path, exc: OSError) -> SetupError:
    return SetupError(
        "create environment",
        f"{path} could not be created ({exc.strerror or exc})",
        storage_remedy(exc.errno, path.parent)
        or "check that the path is writable and its parent is a directory",
    )


@contextlib.contextmanager
def _remove_on_failure(made: list[Path]) -> Iterator[None]:
    try:
        yield
    except BaseException:
        _remove_made(made)
        raise


def _remove_made(made: list[Path]) -> None:
    """Undo --create-env: the new venv (innermost, made by this call, so wholly ours) goes;
    parent folders go only while empty (someone may have put something there meanwhile)."""
    if not made:
        return
    *parents, innermost = made
    shutil.rmtree(innermost, ignore_errors=True)
    for folder in reversed(parents):
        try:
            folder.rmdir()
        except OSError:
            return


def _create_venv(path: Path) -> None:
    """`uv venv` into the folder this call just made (it holds only our lock file)."""
    env = {k: v for k, v in os.environ.items() if k != "UV_VENV_CLEAR"}  # never clear anything
    argv = [uv_binary(), "venv", "--quiet", "--allow-existing", "--python", sys.executable]
    try:
        run_checked([*argv, "--", str(path)], env)
    except (subprocess.SubprocessError, OSError) as exc:
        said = process_failure(exc)
        storage = storage_cause(said, path)
        raise SetupError(
            "create environment",
            f"uv venv failed for {path}: {said[-300:]}",
            (storage_remedy(*storage) if storage else None) or "check the path is writable",
        ) from None
