"""The build's hook (pyproject.toml's [tool.hatch.build.hooks.custom]): writes
mcp_server/_version.py with the version and the commit the build is made from, so that
`--version`, the MCP serverInfo and every record name the exact build.

The commit comes from git when the project root is the top of a git work tree; an unpacked
sdist has no git, and keeps the _version.py its own build wrote (so the wheel built from the
sdist is the wheel built from the checkout); an editable install names no commit (its code is
the work tree, which moves on after the install)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

VERSION_FILE = "mcp_server/_version.py"
TEMPLATE = '''"""Written by the build (hatch_build.py): never edit, never commit."""

__version__ = {version}
# The commit the build was made from (None: not known, or an editable install), and the build's
# name: the version with the commit as a PEP 440 local label (`.dirty`: uncommitted changes).
__commit__ = {commit}
__build__ = {build}
'''


def _git(root: Path, *args: str) -> str | None:
    """git's output in `root`, or None when git is missing or fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=env,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_build(root: Path) -> tuple[str, bool] | None:
    """(commit, has uncommitted changes) of `root` when it is the top of a git work tree (a
    folder inside someone else's repository is not)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root.resolve():
        return None
    commit = _git(root, "rev-parse", "--verify", "HEAD^{commit}")
    changes = _git(root, "status", "--porcelain", "--untracked-files=no")
    if commit is None or changes is None or not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        return None
    return commit, changes != ""


def _kept(path: Path, version: str) -> tuple[str | None, str] | None:
    """The (commit, build) an existing version file names for `version`, if it does."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    names = {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }
    if names.get("__version__") != version or not isinstance(names.get("__build__"), str):
        return None
    return names.get("__commit__"), names["__build__"]


def build_info(root: Path, version: str, *, editable: bool) -> tuple[str | None, str]:
    """(commit, build name) of a build of `root` at `version`."""
    if editable:
        return None, version
    found = git_build(root)
    if found is not None:
        commit, dirty = found
        return commit, f"{version}+g{commit}" + (".dirty" if dirty else "")
    if (root / "PKG-INFO").is_file():  # an unpacked sdist: what its own build knew
        kept = _kept(root / VERSION_FILE, version)
        if kept is not None:
            return kept
    return None, version


def _literal(value: str | None) -> str:
    """`value` as Python source: a PEP 440 version and hex digits need no escaping."""
    return "None" if value is None else f'"{value}"'


class BuildInfoHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        project_version = self.metadata.version
        commit, build = build_info(root, project_version, editable=version == "editable")
        text = TEMPLATE.format(
            version=_literal(project_version), commit=_literal(commit), build=_literal(build)
        )
        target = root / VERSION_FILE
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)
        build_data["artifacts"].append(f"/{VERSION_FILE}")
