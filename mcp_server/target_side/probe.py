"""What an interpreter's environment holds, as that interpreter sees it (environment/probe.py
reads the answer strictly): `probe.py '{"dists": [...], "modules": [...]}'` prints one JSON
object: its paths, platform, marker environment, the distributions named, whether the modules
named import, every installed distribution's version and torch's CUDA build."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import sys
import sysconfig
from importlib import metadata
from typing import Any


def dist_info(name: str) -> dict[str, Any] | None:
    """The installed distribution `name`, or None."""
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


def torch_cuda() -> str | None:
    """The CUDA version torch was built for, from its version.py (torch is never imported)."""
    spec = importlib.util.find_spec("torch")
    if not spec or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        try:
            with open(os.path.join(loc, "version.py"), encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"^cuda\s*(?::\s*[^=]+)?=\s*(.+)$", text, re.M)
        value = m.group(1).strip().strip("'\"") if m else "None"
        return None if value == "None" else value
    return None


def markers() -> dict[str, str]:
    """packaging's default_environment(), in the stdlib: how this interpreter evaluates markers."""
    iv = sys.implementation.version
    ver = f"{iv.major}.{iv.minor}.{iv.micro}"
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


def versions() -> dict[str, str]:
    """Every installed distribution's version, by canonical name."""
    found = {}
    for d in metadata.distributions():
        md = d.metadata  # parsed once: d.version would parse METADATA again for its Version
        name = md["Name"]
        if name:
            found[re.sub(r"[-_.]+", "-", name).lower()] = md["Version"]
    return found


def probe(dists: list[str], modules: list[str]) -> dict[str, Any]:
    paths = sysconfig.get_paths()
    return {
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "purelib": paths["purelib"],
        "platlib": paths["platlib"],
        "markers": markers(),
        "scripts": paths["scripts"],
        "python_version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": sysconfig.get_platform(),
        "dists": {n: dist_info(n) for n in dists},
        "modules": {m: importlib.util.find_spec(m) is not None for m in modules},
        "versions": versions(),
        "torch_cuda": torch_cuda(),
    }


if __name__ == "__main__":
    names = json.loads(sys.argv[1])
    print(json.dumps(probe(names["dists"], names["modules"])))
