"""Probing an interpreter: a small stdlib-only script run in it in isolated mode (`-I`), and
its answer read strictly, so what is reported is what that environment itself sees.
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

def markers():
    # packaging's default_environment(), in the stdlib: how this interpreter evaluates markers.
    iv = sys.implementation.version
    ver = "%d.%d.%d" % (iv.major, iv.minor, iv.micro)
    if iv.releaselevel != "final":
        ver += iv.releaselevel[0] + str(iv.serial)
    return {
        "implementation_name": sys.implementation.name,
        "implementation_version": ver,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }

names = json.loads(sys.argv[1])
versions = {}
for d in metadata.distributions():
    md = d.metadata  # parsed once: d.version would parse METADATA again for its Version
    n = md["Name"]
    if n:
        versions[re.sub(r"[-_.]+", "-", n).lower()] = md["Version"]
print(json.dumps({
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "purelib": sysconfig.get_paths()["purelib"],
    "platlib": sysconfig.get_paths()["platlib"],
    "markers": markers(),
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
    argv = [str(interpreter), "-I", "-B", "-c", _PROBE]
    argv.append(json.dumps({"dists": dists, "modules": modules or []}))
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
