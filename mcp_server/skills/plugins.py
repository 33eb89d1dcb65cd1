"""The plugin manifests' skills, kept equal to the canonical skills folder.

Claude Code's `.claude-plugin/plugin.json` lists each skill folder (`./skills/<name>`); Codex's
`.codex-plugin/plugin.json` names the folder that holds them (`./skills/`). A skill added to or
removed from `skills/` without its manifests would ship to one client and not the other, so
`skills check` compares them; a repository without a manifest has nothing to compare."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_server.skills.links import Problem
from mcp_server.skills.validate import skill_dirs

CLAUDE_MANIFEST = ".claude-plugin/plugin.json"
CODEX_MANIFEST = ".codex-plugin/plugin.json"


def _skills_field(repo_root: Path, rel: str) -> tuple[object, list[Problem]]:
    path = repo_root / rel
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, [Problem(path, 1, "plugin-manifest", f"cannot read it: {exc}")]
    if not isinstance(data, dict):
        return None, [Problem(path, 1, "plugin-manifest", "not a JSON object")]
    return data.get("skills"), []


def check_plugin_manifests(repo_root: Path, canonical: str) -> list[Problem]:
    """Each plugin manifest present must ship exactly the skills of `canonical`."""
    names = [p.name for p in skill_dirs(repo_root / canonical)]
    problems: list[Problem] = []
    if (repo_root / CLAUDE_MANIFEST).exists():
        listed, problems = _skills_field(repo_root, CLAUDE_MANIFEST)
        want = [f"./{canonical}/{name}" for name in names]
        if not problems and (not isinstance(listed, list) or sorted(map(str, listed)) != want):
            message = f"skills must list every folder of {canonical}/: {json.dumps(want)}"
            problems.append(Problem(repo_root / CLAUDE_MANIFEST, 1, "plugin-skills", message))
    if (repo_root / CODEX_MANIFEST).exists():
        listed, found = _skills_field(repo_root, CODEX_MANIFEST)
        problems += found
        if not found and listed not in (f"./{canonical}/", f"./{canonical}"):
            message = f'skills must name the canonical folder: "./{canonical}/"'
            problems.append(Problem(repo_root / CODEX_MANIFEST, 1, "plugin-skills", message))
    return problems
