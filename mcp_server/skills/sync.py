"""The discovery copies of the canonical skills: sync them, detect drift, digest the bundle.

Claude Code discovers `.claude/skills/<name>/SKILL.md`, Codex and other agents
`.agents/skills/<name>/SKILL.md` (https://code.claude.com/docs/en/skills,
https://developers.openai.com/codex/skills). Claude Code does not follow symlinked skill
folders, so the copies are real files, byte-identical to `skills/`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mcp_server.errors import SetupError
from mcp_server.skills.links import Problem, Tally
from mcp_server.skills.plugins import check_plugin_manifests
from mcp_server.skills.validate import skill_dirs, validate_skills_root, walk

CANONICAL_DIR = "skills"
MIRROR_DIRS = (".claude/skills", ".agents/skills")
_SYNC_HINT = "run: automl-setup skills sync"


def _tree(root: Path) -> dict[str, Path]:
    return {entry.relative_to(root).as_posix(): entry for entry in walk(root)}


def _executable(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IXUSR)


def _first_difference(a: bytes, b: bytes) -> int:
    pairs = zip(a.split(b"\n"), b.split(b"\n"), strict=False)  # a length change shows at the end
    for number, (line_a, line_b) in enumerate(pairs, start=1):
        if line_a != line_b:
            return number
    return min(a.count(b"\n"), b.count(b"\n")) + 1


def _symlinked_ancestor(repo_root: Path, mirror: Path) -> Path | None:
    for folder in [mirror, *mirror.parents]:
        if folder == repo_root:
            return None
        if folder.is_symlink():
            return folder
    return None


def check_drift(
    repo_root: Path,
    mirrors: tuple[str, ...] = MIRROR_DIRS,
    canonical_dir: str = CANONICAL_DIR,
) -> list[Problem]:
    """Each discovery folder must hold exactly the canonical skills, byte for byte, no links."""
    canonical = repo_root / canonical_dir
    expected = _tree(canonical)
    problems: list[Problem] = []
    for mirror_rel in mirrors:
        mirror = repo_root / mirror_rel
        linked = _symlinked_ancestor(repo_root, mirror)
        if linked is not None:
            message = f"symlink; clients need real folders ({_SYNC_HINT})"
            problems.append(Problem(linked, 1, "symlink", message))
            continue
        if not mirror.is_dir():
            problems.append(Problem(mirror, 1, "drift-missing", f"missing ({_SYNC_HINT})"))
            continue
        actual = _tree(mirror)
        reported: list[str] = []
        for rel in sorted(expected.keys() | actual.keys()):
            if any(rel.startswith(prefix + "/") for prefix in reported):
                continue  # inside a folder already reported as missing or extra
            problem = _compare(rel, expected.get(rel), actual.get(rel), mirror / rel)
            if problem is not None:
                problems.append(problem)
                reported.append(rel)
    return problems


def _compare(rel: str, want: Path | None, have: Path | None, where: Path) -> Problem | None:
    if have is not None and have.is_symlink():
        return Problem(where, 1, "symlink", f"symlink; clients need real files ({_SYNC_HINT})")
    if have is None:
        return Problem(where, 1, "drift-missing", f"missing copy of skills/{rel} ({_SYNC_HINT})")
    if want is None:
        what = "skill" if "/" not in rel else "file"
        return Problem(where, 1, "drift-extra", f"extra {what}, not in skills/ ({_SYNC_HINT})")
    if want.is_dir() != have.is_dir():
        kind = "folder" if want.is_dir() else "file"
        return Problem(where, 1, "drift-content", f"should be a {kind} ({_SYNC_HINT})")
    if want.is_dir():
        return None
    a, b = want.read_bytes(), have.read_bytes()
    if a != b:
        line = _first_difference(a, b)
        return Problem(where, line, "drift-content", f"differs from skills/{rel} ({_SYNC_HINT})")
    if _executable(want) != _executable(have):
        return Problem(where, 1, "drift-mode", f"executable bit differs ({_SYNC_HINT})")
    return None


def check_repository(
    repo_root: Path,
    canonical_dir: str = CANONICAL_DIR,
    mirrors: tuple[str, ...] = MIRROR_DIRS,
    tally: Tally | None = None,
) -> list[Problem]:
    """`skills check` with no paths: the canonical skills, the discovery copies named in
    `mirrors`, and the skills the plugin manifests ship."""
    return (
        validate_skills_root(repo_root / canonical_dir, tally)
        + check_drift(repo_root, mirrors, canonical_dir)
        + check_plugin_manifests(repo_root, canonical_dir)
    )


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def _write_copy(source: Path, target: Path) -> None:
    # Temp file then rename: a reader never sees half a SKILL.md.
    mode = 0o755 if _executable(source) else 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".sync-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(source.read_bytes())
        Path(tmp).chmod(mode)
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sync(repo_root: Path) -> list[str]:
    """Make both discovery folders exact copies of skills/; returns what changed."""
    canonical = repo_root / CANONICAL_DIR
    if not canonical.is_dir():
        raise SetupError(
            "skills sync",
            f"no {CANONICAL_DIR}/ folder in {repo_root}",
            "run it from the repository root, or pass --root DIR",
        )
    # Warnings (the specification's advice) do not stop a copy; errors do.
    problems = [p for p in validate_skills_root(canonical) if p.severity == "error"]
    if problems:
        raise SetupError(
            "skills sync",
            "the canonical skills do not pass the check; nothing was copied",
            "fix skills/ and run: automl-setup skills check",
            details=[p.format(repo_root) for p in problems],
        )
    expected = _tree(canonical)
    changes: list[str] = []
    for mirror_rel in MIRROR_DIRS:
        mirror = repo_root / mirror_rel
        linked = _symlinked_ancestor(repo_root, mirror.parent)
        if linked is not None:
            # Only the skills folder itself is ours to replace, never its parent.
            raise SetupError(
                "skills sync",
                f"{linked} is a symlink; not writing through it",
                f"replace {linked} with a real folder, then sync again",
            )
        if mirror.is_symlink() or (mirror.exists() and not mirror.is_dir()):
            mirror.unlink()
            changes.append(f"replaced {mirror_rel} (was not a real folder)")
        mirror.mkdir(parents=True, exist_ok=True)
        # Remove first, deepest last: extras, symlinks, and entries of the wrong kind.
        for rel, have in sorted(_tree(mirror).items()):
            if not have.is_symlink() and not have.exists():
                continue  # already removed with its folder
            want = expected.get(rel)
            if have.is_symlink() or want is None or want.is_dir() != have.is_dir():
                _remove(have)
                changes.append(f"removed {mirror_rel}/{rel}")
        for rel, want in expected.items():
            target = mirror / rel
            if want.is_dir():
                target.mkdir(exist_ok=True)
            elif _compare(rel, want, target if target.exists() else None, target) is not None:
                _write_copy(want, target)
                changes.append(f"wrote {mirror_rel}/{rel}")
    leftover = check_drift(repo_root)
    if leftover:  # pragma: no cover - a bug in sync, never a user error
        details = [p.format(repo_root) for p in leftover]
        raise SetupError(
            "skills sync", "copies still differ after sync", "report this bug", details=details
        )
    return changes


# --- digests ------------------------------------------------------------------------------


def manifest(skills_root: Path) -> dict[str, Any]:
    """sha256 and size of every skill file, plus one digest over them all."""
    files: list[dict[str, Any]] = []
    for rel, path in sorted(_tree(skills_root).items()):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            files.append(
                {"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            )
    return {
        "skills": [p.name for p in skill_dirs(skills_root)],
        "files": files,
        "bundle_sha256": listing_digest((f["path"], f["sha256"]) for f in files),
    }


def listing_digest(files: Iterable[tuple[str, str]]) -> str:
    """sha256 of the `sha256sum` listing of (path, sha256), sorted by path: one digest of a
    skills folder (`skills manifest`) or of the skills an installation carries (`init`)."""
    listing = "".join(f"{digest}  {path}\n" for path, digest in sorted(files))
    return hashlib.sha256(listing.encode()).hexdigest()
