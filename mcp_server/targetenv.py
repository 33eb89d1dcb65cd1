"""The target environment: which interpreter, where its files live, what is installed in it.

Everything is read by running the target's own interpreter in isolated mode (`-I`) with a
small probe script, so the answer is what that environment itself sees.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.fsutil import exclusive_lock
from mcp_server.persisted import describe_error

STATE_DIR_NAME = ".automl-setup"
LOCK_NAME = "lock"  # <state dir>/lock: the environment lock (RecordStore.lock_path)
PROBE_TIMEOUT_S = 120.0
WATCHED_PACKAGES = ("gepa", "torch")

# Runs inside the target interpreter (any Python >= 3.8): stdlib only, prints one JSON object.
_PROBE = r"""
import json, os, re, sys, sysconfig, platform
import importlib.util
from importlib import metadata

def dist_info(name):
    try:
        d = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    path = getattr(d, "_path", None)
    return {
        "name": d.metadata["Name"],
        "version": d.version,
        "dist_info": str(path) if path else None,
        "direct_url": d.read_text("direct_url.json"),
        "installer": (d.read_text("INSTALLER") or "").strip() or None,
        "requires": list(d.requires or []),
        "console_scripts": sorted(
            ep.name for ep in d.entry_points if ep.group == "console_scripts"
        ),
    }

def torch_cuda():
    spec = importlib.util.find_spec("torch")
    if not spec or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        try:
            text = open(os.path.join(loc, "version.py"), encoding="utf-8").read()
        except OSError:
            continue
        m = re.search(r"^cuda\s*(?::\s*[^=]+)?=\s*(.+)$", text, re.M)
        value = m.group(1).strip().strip("'\"") if m else "None"
        return None if value == "None" else value
    return None

names = json.loads(sys.argv[1])
versions = {}
for d in metadata.distributions():
    n = d.metadata["Name"]
    if n:
        versions[re.sub(r"[-_.]+", "-", n).lower()] = d.version
print(json.dumps({
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "purelib": sysconfig.get_paths()["purelib"],
    "scripts": sysconfig.get_paths()["scripts"],
    "python_version": platform.python_version(),
    "implementation": platform.python_implementation(),
    "platform": sysconfig.get_platform(),
    "dists": {n: dist_info(n) for n in names["dists"]},
    "modules": {m: importlib.util.find_spec(m) is not None for m in names["modules"]},
    "versions": versions,
    "torch_cuda": torch_cuda(),
}))
"""


def _absolute(value: str) -> str:
    if not Path(value).is_absolute():
        raise ValueError(f"{value!r} is not an absolute path")
    return value


AbsolutePath = Annotated[str, AfterValidator(_absolute)]


class _Answer(BaseModel):
    """The probe's answer is checked for shape and types: a program that is not the Python
    the probe expects must be refused, not read with a KeyError waiting to happen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _DistAnswer(_Answer):
    name: str
    version: str
    dist_info: str | None
    direct_url: str | None
    installer: str | None
    requires: list[str]
    console_scripts: list[str]


class _ProbeAnswer(_Answer):
    executable: str
    prefix: AbsolutePath
    base_prefix: str
    purelib: AbsolutePath
    scripts: AbsolutePath
    python_version: str
    implementation: str
    platform: str
    dists: dict[str, _DistAnswer | None]
    modules: dict[str, bool]
    versions: dict[str, str]
    torch_cuda: str | None


@dataclass(frozen=True)
class InstalledDist:
    name: str
    version: str
    dist_info: Path | None
    direct_url: str | None
    installer: str | None
    requires: tuple[str, ...]
    console_scripts: tuple[str, ...]


@dataclass(frozen=True)
class Probe:
    executable: str
    prefix: Path
    purelib: Path
    scripts: Path
    python_version: str
    implementation: str
    platform: str
    dists: dict[str, InstalledDist | None]
    modules: dict[str, bool]
    versions: dict[str, str]  # canonical name -> version, every distribution in the environment
    torch_cuda: str | None
    is_venv: bool = field(default=False)


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
        argv = [str(self.interpreter), "-I", "-c", _PROBE]
        argv.append(json.dumps({"dists": dists, "modules": modules or []}))
        try:
            out = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=PROBE_TIMEOUT_S,
                check=True,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            raise SetupError(
                "inspect environment",
                f"the interpreter {self.interpreter} could not be inspected ({_failure(exc)})",
                "the target must be Python 3.8 or newer; pass --python pointing at one",
            ) from None
        try:
            data = _ProbeAnswer.model_validate_json(out.stdout)
        except ValidationError as exc:
            raise SetupError(
                "inspect environment",
                f"{self.interpreter} is not a Python interpreter automl-setup can use: its "
                f"answer to the probe is malformed ({describe_error(exc)})",
                "pass --python pointing at a working Python 3.8+ interpreter or venv",
            ) from None
        return Probe(
            executable=data.executable,
            prefix=Path(data.prefix),
            purelib=Path(data.purelib),
            scripts=Path(data.scripts),
            python_version=data.python_version,
            implementation=data.implementation,
            platform=data.platform,
            dists={k: _installed(v) for k, v in data.dists.items()},
            modules=data.modules,
            versions=data.versions,
            torch_cuda=data.torch_cuda,
            is_venv=data.prefix != data.base_prefix,
        )


def _failure(exc: BaseException) -> str:
    """The interpreter's own last error line; never the probe script (the argv) itself."""
    if isinstance(exc, subprocess.CalledProcessError):
        lines = (exc.stderr or "").strip().splitlines()
        return lines[-1] if lines else f"exit status {exc.returncode}"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"no answer within {exc.timeout:.0f} s"
    return str(exc)


def _installed(raw: _DistAnswer | None) -> InstalledDist | None:
    if raw is None:
        return None
    return InstalledDist(
        name=raw.name,
        version=raw.version,
        dist_info=Path(raw.dist_info) if raw.dist_info else None,
        direct_url=raw.direct_url,
        installer=raw.installer,
        requires=tuple(raw.requires),
        console_scripts=tuple(raw.console_scripts),
    )


VENV_INTERPRETERS = ("bin/python", "bin/python3", "Scripts/python.exe")
BROKEN_REMEDY = (
    "automl-setup never replaces an existing environment: recreate it yourself (remove it, "
    "then install with --python PATH --create-env) or pass another --python"
)
OWN_ENV_REMEDY = (
    "installing the engine there would let the engine's dependencies change automl-setup "
    "itself; pass --python of a separate venv (add --create-env to make a new one)"
)


def _requested(python: str | None) -> tuple[Path, str]:
    """The target path as given (PATH, else VIRTUAL_ENV) and a note naming where it came from."""
    step = "locate environment"
    raw = python or os.environ.get("VIRTUAL_ENV")
    if not raw:
        raise InvalidInput(
            step,
            "no target environment given",
            "pass --python PATH (an interpreter or a venv directory) or activate a venv",
        )
    if "\x00" in raw or "\n" in raw:
        raise InvalidInput(
            step,
            "the environment path contains a control character",
            "pass --python PATH (an interpreter or a venv directory)",
        )
    return Path(raw).expanduser().absolute(), "" if python else " ($VIRTUAL_ENV)"


def locate(python: str | None) -> TargetEnv:
    """PATH (interpreter or venv directory), or VIRTUAL_ENV when PATH is not given; read-only
    (automl-setup's own environment may be read: nothing is written by locating it)."""
    return _existing(*_requested(python))


def locate_for_change(python: str | None) -> TargetEnv:
    """`locate` for commands that write into the environment: automl-setup's own is refused,
    and so is one another automl-setup process holds (it may be creating it right now)."""
    return _for_change(*_requested(python))


def _for_change(path: Path, origin: str) -> TargetEnv:
    _refuse_in_use(path)
    return _refuse_own(_existing(path, origin), origin)


@contextlib.contextmanager
def open_for_install(python: str | None, *, create: bool) -> Iterator[TargetEnv]:
    """The install target with its environment lock held for the duration. With `create`, a
    path that does not exist yet becomes a new venv, claimed before anyone else can see it: the
    lock is taken before the venv is usable, so a concurrent install refuses "in use", and if
    the body fails, only what this call made is removed again."""
    path, origin = _requested(python)
    with contextlib.ExitStack() as stack:
        env = None
        if create and not os.path.lexists(path):
            # `NEW/bin/python` names the interpreter of a venv to create at NEW.
            if path.parent.name in ("bin", "Scripts") and path.name.startswith("python"):
                path = path.parent.parent
            env = _claim_new(path, stack)
        if env is None:
            env = _for_change(path, origin)
            stack.enter_context(
                exclusive_lock(env.lock_path, step="install", holder=f"environment {env.prefix}")
            )
        yield env


def _existing(path: Path, origin: str) -> TargetEnv:
    step = "locate environment"
    if not os.path.lexists(path):
        raise SetupError(
            step,
            f"{path}{origin} does not exist",
            "check the path; `automl-setup install --create-env` creates a new environment",
            exit_code=ExitCode.NOTHING_INSTALLED,
        )
    interpreter = _venv_interpreter(path) if path.is_dir() else path
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
    prefix = _prefix_of(interpreter)
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


def _venv_interpreter(directory: Path) -> Path:
    for candidate in VENV_INTERPRETERS:
        if os.path.lexists(directory / candidate):
            return directory / candidate
    step = "locate environment"
    if (directory / "pyvenv.cfg").is_file():
        raise SetupError(
            step,
            f"{directory} is a broken virtual environment: it has no bin/python",
            BROKEN_REMEDY,
        )
    raise InvalidInput(
        step,
        f"{directory} is a directory but not a virtual environment (no bin/python); "
        "nothing in it was touched",
        "pass a venv directory or an interpreter, or a path that does not exist yet with "
        "--create-env",
    )


def _refuse_in_use(path: Path) -> None:
    """Before running anything in it: a venv whose lock is held may be half made by a
    concurrent --create-env (its interpreter could even report the base Python's prefix)."""
    venv = path if path.is_dir() else path.parent.parent
    holder = _lock_holder(venv / STATE_DIR_NAME / LOCK_NAME)
    if holder is not None:
        raise SetupError(
            "locate environment",
            f"environment {venv} is in use by another automl-setup process ({holder}); it may "
            "be creating this environment concurrently",
            "wait for it to finish, then run the command again",
        )


def _lock_holder(lock: Path) -> str | None:
    """Who holds the environment lock `lock` (its pid text), or None; never creates it."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
    finally:
        os.close(fd)
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


def _prefix_of(interpreter: Path) -> Path:
    step = "locate environment"
    remedy = "pass --python pointing at a working Python 3 interpreter or venv"
    try:
        out = subprocess.run(
            [str(interpreter), "-I", "-c", "import sys; print(sys.prefix)"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT_S,
            check=True,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        raise InvalidInput(
            step,
            f"{interpreter} does not run as a Python interpreter ({_failure(exc)}); "
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


def _claim_new(path: Path, stack: contextlib.ExitStack) -> TargetEnv | None:
    """Create the venv `path` for this call, holding its environment lock from the moment the
    folder exists; None when another process made `path` first (the caller then treats it as
    an existing environment: in use, or not one). Under `stack` on return: the lock, and the
    removal of every folder this call made should the caller's body fail."""
    made = _make_parents(path.parent)
    # The parent's flock makes "folder made + lock taken" one step for every automl-setup
    # process: nobody sees the new folder without its lock held.
    with _remove_on_failure(made), _dir_lock(path.parent):
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
    interpreter = _venv_interpreter(path)
    return TargetEnv(interpreter=interpreter, prefix=_prefix_of(interpreter), created=path)


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
        "check that the path is writable and its parent is a directory",
    )


@contextlib.contextmanager
def _dir_lock(directory: Path) -> Iterator[None]:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise _cannot_create(directory, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held only for a mkdir and a lock: never long
        yield
    finally:
        os.close(fd)


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
    from mcp_server.build import uv_binary

    env = {k: v for k, v in os.environ.items() if k != "UV_VENV_CLEAR"}  # never clear anything
    argv = [uv_binary(), "venv", "--quiet", "--allow-existing", "--python", sys.executable]
    try:
        subprocess.run(
            [*argv, "--", str(path)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=env,
            timeout=PROBE_TIMEOUT_S,
            check=True,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        raise SetupError(
            "create environment",
            f"uv venv failed for {path}: {_failure(exc)[-300:]}",
            "check the path is writable",
        ) from None
