"""The target environment: which interpreter, where its files live, what is installed in it.

Everything is read by running the target's own interpreter in isolated mode (`-I`) with a
small probe script, so the answer is what that environment itself sees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_server.errors import ExitCode, InvalidInput, SetupError

STATE_DIR_NAME = ".automl-setup"
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
    created: Path | None = None  # the topmost folder --create-env made, if it made one

    @property
    def state_dir(self) -> Path:
        return self.prefix / STATE_DIR_NAME

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
            data: dict[str, Any] = json.loads(out.stdout)
        except (subprocess.SubprocessError, OSError, ValueError) as exc:
            raise SetupError(
                "inspect environment",
                f"the interpreter {self.interpreter} could not be inspected ({_failure(exc)})",
                "the target must be Python 3.8 or newer; pass --python pointing at one",
            ) from None
        return Probe(
            executable=data["executable"],
            prefix=Path(data["prefix"]),
            purelib=Path(data["purelib"]),
            scripts=Path(data["scripts"]),
            python_version=data["python_version"],
            implementation=data["implementation"],
            platform=data["platform"],
            dists={k: _installed(v) for k, v in data["dists"].items()},
            modules=data["modules"],
            versions=data["versions"],
            torch_cuda=data["torch_cuda"],
            is_venv=data["prefix"] != data["base_prefix"],
        )


def _failure(exc: BaseException) -> str:
    """The interpreter's own last error line; never the probe script (the argv) itself."""
    if isinstance(exc, subprocess.CalledProcessError):
        lines = (exc.stderr or "").strip().splitlines()
        return lines[-1] if lines else f"exit status {exc.returncode}"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"no answer within {exc.timeout:.0f} s"
    return type(exc).__name__ if isinstance(exc, ValueError) else str(exc)


def _installed(raw: dict[str, Any] | None) -> InstalledDist | None:
    if raw is None:
        return None
    return InstalledDist(
        name=raw["name"],
        version=raw["version"],
        dist_info=Path(raw["dist_info"]) if raw["dist_info"] else None,
        direct_url=raw["direct_url"],
        installer=raw["installer"],
        requires=tuple(raw["requires"]),
        console_scripts=tuple(raw["console_scripts"]),
    )


def _venv_interpreter(directory: Path) -> Path:
    for candidate in ("bin/python", "bin/python3", "Scripts/python.exe"):
        if (directory / candidate).exists():
            return directory / candidate
    raise InvalidInput(
        "locate environment",
        f"{directory} is a directory but not a virtual environment (no bin/python)",
        "pass a venv directory or an interpreter, or add --create-env for a new path",
    )


def locate(python: str | None, *, create: bool = False) -> TargetEnv:
    """PATH (interpreter or venv directory), or VIRTUAL_ENV when PATH is not given."""
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
    path = Path(raw).expanduser().absolute()
    created: Path | None = None
    if not path.exists():
        origin = "" if python else " ($VIRTUAL_ENV)"
        if not create:
            raise SetupError(
                step,
                f"{path}{origin} does not exist",
                "check the path; `automl-setup install --create-env` creates a new environment",
                exit_code=ExitCode.NOTHING_INSTALLED,
            )
        # `NEW/bin/python` names the interpreter of a venv to create at NEW.
        if path.parent.name in ("bin", "Scripts") and path.name.startswith("python"):
            path = path.parent.parent
        created = path
        while not created.parent.exists():  # undo must remove every folder we made
            created = created.parent
        _create_venv(path)
    interpreter = _venv_interpreter(path) if path.is_dir() else path
    if not os.access(interpreter, os.X_OK):
        raise InvalidInput(
            step,
            f"{interpreter} is not an executable interpreter",
            "pass --python pointing at a Python interpreter or a virtual environment",
        )
    prefix = _prefix_of(interpreter)
    return TargetEnv(interpreter=interpreter, prefix=prefix, created=created)


def _prefix_of(interpreter: Path) -> Path:
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
            "locate environment",
            f"{interpreter} does not run as a Python interpreter ({_failure(exc)})",
            "pass --python pointing at a working Python 3 interpreter or venv",
        ) from None
    return Path(out.stdout.strip())


def _create_venv(path: Path) -> None:
    from mcp_server.build import uv_binary

    try:
        subprocess.run(
            [uv_binary(), "venv", "--quiet", "--python", sys.executable, "--", str(path)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT_S,
            check=True,
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(path, ignore_errors=True)
        raise SetupError(
            "create environment",
            f"uv venv failed for {path}: {exc.stderr.strip()[-300:]}",
            "check the path is writable",
        ) from None


def remove_created(env: TargetEnv) -> None:
    """Undo --create-env after a failed install: the new environment held nothing before."""
    if env.created is not None:
        shutil.rmtree(env.created, ignore_errors=True)
