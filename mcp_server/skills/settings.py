"""Where a repository keeps its skills: the canonical folder and the discovery copies.

Any repository can validate its skills with `skills check`, laid out as it likes: the
canonical folder (`--skills-dir`, default `skills`) and the mirrors that must be exact copies
of it (`--mirror PATH`, repeatable). Without flags, the repository's own settings decide
(`[tool.automl-setup.skills]` of its pyproject.toml, or `[skills]` of its automl-setup.toml,
which wins), else only the known discovery folders that exist are compared: a repository that
never had a `.claude/skills` copy is not told it is missing."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mcp_server.skills.sync import CANONICAL_DIR, MIRROR_DIRS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_KEYS = {"skills-dir", "mirrors"}


class LayoutError(ValueError):
    """A setting that cannot be used (a usage error: exit 2)."""


@dataclass(frozen=True)
class SkillsLayout:
    skills_dir: str
    mirrors: tuple[str, ...]
    source: str  # where the layout came from, for the summary


def _relative(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise LayoutError(f"{what} must be a non-empty string")
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts or "\\" in value:
        raise LayoutError(f"{what} {value!r} must be a path inside the repository")
    return path.as_posix()


def _table(root: Path) -> tuple[dict[str, Any], str] | None:
    dedicated, pyproject = root / "automl-setup.toml", root / "pyproject.toml"
    for path, keys in ((dedicated, ("skills",)), (pyproject, ("tool", "automl-setup", "skills"))):
        if not path.is_file():
            continue
        try:
            node: Any = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise LayoutError(f"cannot read {path}: {exc}") from None
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            label = f"{path.name} [{'.'.join(keys)}]"
            if not isinstance(node, dict):
                raise LayoutError(f"{label} must be a table")
            return node, label
    return None


def read_layout(root: Path, skills_dir: str | None, mirrors: list[str] | None) -> SkillsLayout:
    """Flags > the repository's settings > the defaults (the existing known mirrors)."""
    found = _table(root)
    table, label = found if found else ({}, "")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise LayoutError(
            f"{label}: unknown keys {', '.join(unknown)} (known: skills-dir, mirrors)"
        )
    folder = skills_dir or table.get("skills-dir") or CANONICAL_DIR
    folder = _relative(folder, "--skills-dir" if skills_dir else f"{label} skills-dir")
    if mirrors is not None:
        named = tuple(_relative(m, "--mirror") for m in mirrors)
        return SkillsLayout(folder, named, "--mirror")
    if "mirrors" in table:
        listed = table["mirrors"]
        if not isinstance(listed, list):
            raise LayoutError(f"{label} mirrors must be a list of paths")
        return SkillsLayout(folder, tuple(_relative(m, f"{label} mirrors") for m in listed), label)
    existing = tuple(m for m in MIRROR_DIRS if (root / m).exists() or (root / m).is_symlink())
    return SkillsLayout(folder, existing, label or "the discovery folders that exist")
