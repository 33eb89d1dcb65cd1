"""Byte-identity snapshots of folders: a tree's files by sha256, a venv's, a project's."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path


def tree_digest(root: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> dict[str, str]:
    """sha256 of every regular file under root (symlinks by target), for byte-identity checks."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or skip(rel):
            continue
        if path.is_symlink():
            out[str(rel)] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def env_snapshot(env_dir: Path) -> dict[str, str]:
    """Everything an install may touch in a venv: packages, scripts and the automl-setup state
    (except the lock file, whose pid text changes by design)."""
    return tree_digest(env_dir, skip=lambda rel: rel.name == "lock")


def snapshot(project: Path) -> dict[str, str]:
    """Every file of a project but its .git, for byte-identity checks."""
    return tree_digest(project, skip=lambda rel: rel.parts[0] == ".git")
