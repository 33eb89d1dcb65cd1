"""An environment that is a uv-managed project's `.venv`, and the engine a sync removed from it.

`uv sync` and `uv run` make a project's environment exactly what its `uv.lock` lists (exact by
default), so they remove an engine automl-setup installed there afterwards: the record stays
behind and the engine is gone. That case is told as what it is, with its remedies.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_FILES = ("pyproject.toml", "uv.lock")


def uv_project(prefix: Path) -> Path | None:
    """The uv project whose environment `prefix` is (its parent holds pyproject.toml and
    uv.lock), or None."""
    project = prefix.parent
    if all((project / name).is_file() for name in PROJECT_FILES):
        return project
    return None


def removed_by_sync(prefix: Path, distribution: str) -> list[str]:
    """Notes for a recorded engine that is missing from a uv project's environment."""
    project = uv_project(prefix)
    if project is None:
        return []
    return [
        f"engine removed by a sync: {prefix} is the environment of the uv project {project}, "
        f"and `uv sync` or `uv run` (exact by default) removes every package its uv.lock does "
        f"not list, {distribution} included",
        f"remedy: reinstall after syncing (`automl-setup diagnose --python {prefix}` prints the "
        "install commands), then run with `uv run --no-sync`; or sync with `uv sync --inexact`, "
        "which keeps it",
    ]
