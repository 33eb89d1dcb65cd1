"""No build of torch the user did not choose.

torch wheels differ by build (CPU, one per CUDA version) under one version number, and the
default index's Linux wheel brings gigabytes of CUDA libraries. So when the extras asked for
bring torch:

- an environment without torch is refused before anything is touched: the user installs the
  build they want first; so is one whose torch the engine's own requirement excludes;
- an environment with torch keeps it: uv is given a constraint pinning the installed version
  (a dependency's requirement it cannot meet fails uv's resolution, before uv changes a file;
  the transaction rolls back), and the version and CUDA build are compared after the install
  like every other identity field.
"""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from mcp_server.environment.identity import active_requirements
from mcp_server.environment.probe import Probe
from mcp_server.errors import SetupError
from mcp_server.fsutil import atomic_write_bytes

TORCH = "torch"


def refuse_other_torch(
    requires: tuple[str, ...] | list[str], extras: list[str], before: Probe
) -> None:
    """Called before the transaction: refuse when the engine with these extras requires torch
    and the environment has none (uv would choose the build), or one outside the engine's
    requirement (uv would replace it)."""
    wanted = [
        req for req in active_requirements(requires, extras) if canonicalize_name(req.name) == TORCH
    ]
    if not wanted:
        return
    env = before.prefix
    installed = before.versions.get(TORCH)
    flags = " ".join(f"--extra {extra}" for extra in extras)
    engine = f"the engine with {flags}" if flags else "the engine"
    if installed is None:
        raise SetupError(
            "check torch",
            f"{engine} requires torch and {env} has none; uv would pick a torch "
            "build from the index (on Linux a CUDA build with gigabytes of libraries) that you "
            "did not choose; nothing was installed",
            f"install the torch build you want into {env} first (CPU: uv pip install --python "
            f"{env} torch --index-url https://download.pytorch.org/whl/cpu; CUDA: the index of "
            "your CUDA version), then run this install again",
        )
    refused = [
        f"{req.name}{req.specifier}"
        for req in wanted
        if not req.specifier.contains(installed, prereleases=True)
    ]
    if refused:
        raise SetupError(
            "check torch",
            f"{engine} requires {', '.join(refused)} and {env} has torch "
            f"{installed}, which an install never replaces or upgrades; nothing was installed",
            "install an engine that accepts this torch, or create a new environment, install "
            "the torch build the engine needs into it first, and install the engine there",
        )


def keep_torch_args(before: Probe, workdir: Path) -> list[str]:
    """uv options that keep the installed torch: a constraints file pinning its version."""
    version = before.versions.get(TORCH)
    if version is None:
        return []
    constraints = workdir / "keep-torch.txt"
    atomic_write_bytes(constraints, f"{TORCH}=={version}\n".encode())
    return ["--constraints", str(constraints)]


def check_torch_kept(before: Probe, after: Probe) -> None:
    """After uv: the torch that was there is still there, same version, same CUDA build."""
    if TORCH not in before.versions:
        return
    was = (before.versions[TORCH], before.torch_cuda)
    now = (after.versions.get(TORCH), after.torch_cuda)
    if was == now:
        return
    raise SetupError(
        "verify torch",
        f"the install changed torch in {before.prefix}; torch is never replaced or upgraded",
        "report this with the uv log: the installer went past the constraint that pins torch",
        details=[
            f"torch before: {was[0]} (CUDA {was[1] or 'none'})",
            f"torch after:  {now[0] or 'absent'} (CUDA {now[1] or 'none'})",
        ],
    )
