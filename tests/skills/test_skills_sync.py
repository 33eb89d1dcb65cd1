"""Sync writes real, byte-identical copies; the drift check catches every way they diverge."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_server.errors import SetupError
from mcp_server.skills import sync as skills
from mcp_server.source.profile import tomllib

REPO = Path(__file__).resolve().parents[2]
CLAUDE, AGENTS = (Path(m) for m in skills.MIRROR_DIRS)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of this repository's skills, synced: the state a clean checkout has."""
    shutil.copytree(REPO / "skills", tmp_path / "skills")
    skills.sync(tmp_path)
    return tmp_path


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under root: file bytes, 'dir', or the symlink's target."""
    result: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            result[rel] = "-> " + str(path.readlink())
        elif path.is_dir():
            result[rel] = "dir"
        else:
            result[rel] = path.read_bytes()
    return result


def _rules(repo: Path) -> list[tuple[str, str]]:
    return [(p.rule, p.path.relative_to(repo).as_posix()) for p in skills.check_drift(repo)]


def test_sync_makes_real_byte_identical_copies(repo: Path) -> None:
    canonical = _snapshot(repo / "skills")
    assert any(rel.endswith("/SKILL.md") for rel in canonical)
    for mirror in (CLAUDE, AGENTS):
        assert _snapshot(repo / mirror) == canonical
        assert not any(p.is_symlink() for p in (repo / mirror).rglob("*"))
    assert skills.check_repository(repo) == []


def test_sync_twice_changes_nothing(repo: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in repo.rglob("*") if p.is_file()}
    assert skills.sync(repo) == []
    assert {p: p.stat().st_mtime_ns for p in repo.rglob("*") if p.is_file()} == before


def _edit_byte(repo: Path) -> None:
    path = repo / CLAUDE / "automl-setup" / "SKILL.md"
    data = bytearray(path.read_bytes())
    offset = data.index(b"\n", data.index(b"# Install")) + 5  # a byte on the next line
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _missing_file(repo: Path) -> None:
    (repo / AGENTS / "automl-setup" / "references" / "transitions.md").unlink()


def _missing_skill(repo: Path) -> None:
    shutil.rmtree(repo / AGENTS / "automl-troubleshoot")


def _extra_skill(repo: Path) -> None:
    extra = repo / CLAUDE / "hand-made"
    extra.mkdir()
    (extra / "SKILL.md").write_text("---\nname: hand-made\ndescription: x\n---\n")


def _extra_file(repo: Path) -> None:
    (repo / AGENTS / "automl-setup" / "notes.md").write_text("# stray\n")


def _symlinked_file(repo: Path) -> None:
    path = repo / CLAUDE / "automl-setup" / "SKILL.md"
    path.unlink()
    path.symlink_to(repo / "skills" / "automl-setup" / "SKILL.md")


def _symlinked_skill(repo: Path) -> None:
    path = repo / AGENTS / "automl-experiments"
    shutil.rmtree(path)
    path.symlink_to(repo / "skills" / "automl-experiments", target_is_directory=True)


def _symlinked_mirror(repo: Path) -> None:
    shutil.rmtree(repo / AGENTS)
    (repo / AGENTS).symlink_to("../skills", target_is_directory=True)


def _missing_mirror(repo: Path) -> None:
    shutil.rmtree(repo / CLAUDE)


def _executable_bit(repo: Path) -> None:
    (repo / CLAUDE / "automl-setup" / "SKILL.md").chmod(0o755)


def _file_instead_of_folder(repo: Path) -> None:
    folder = repo / AGENTS / "automl-setup" / "references"
    shutil.rmtree(folder)
    folder.write_text("not a folder\n")


DRIFTS: dict[str, tuple[Callable[[Path], None], list[tuple[str, str]]]] = {
    "edited byte": (
        _edit_byte,
        [("drift-content", ".claude/skills/automl-setup/SKILL.md")],
    ),
    "missing file": (
        _missing_file,
        [("drift-missing", ".agents/skills/automl-setup/references/transitions.md")],
    ),
    "missing skill": (
        _missing_skill,
        [("drift-missing", ".agents/skills/automl-troubleshoot")],
    ),
    "extra skill": (
        _extra_skill,
        [("drift-extra", ".claude/skills/hand-made")],
    ),
    "extra file": (
        _extra_file,
        [("drift-extra", ".agents/skills/automl-setup/notes.md")],
    ),
    "symlinked file": (
        _symlinked_file,
        [("symlink", ".claude/skills/automl-setup/SKILL.md")],
    ),
    "symlinked skill": (
        _symlinked_skill,
        [("symlink", ".agents/skills/automl-experiments")],
    ),
    "symlinked discovery folder": (
        _symlinked_mirror,
        [("symlink", ".agents/skills")],
    ),
    "missing discovery folder": (
        _missing_mirror,
        [("drift-missing", ".claude/skills")],
    ),
    "executable bit": (
        _executable_bit,
        [("drift-mode", ".claude/skills/automl-setup/SKILL.md")],
    ),
    "file instead of folder": (
        _file_instead_of_folder,
        [("drift-content", ".agents/skills/automl-setup/references")],
    ),
}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_check_detects_drift_and_sync_repairs_it(drift: str, repo: Path) -> None:
    damage, expected = DRIFTS[drift]
    canonical = _snapshot(repo / "skills")
    damage(repo)
    assert _rules(repo) == expected
    assert skills.check_repository(repo) != []

    changes = skills.sync(repo)

    assert changes
    assert _snapshot(repo / "skills") == canonical  # never written through a symlink
    assert skills.check_repository(repo) == []


def test_edited_byte_is_reported_at_its_line(repo: Path) -> None:
    path = repo / CLAUDE / "automl-setup" / "SKILL.md"
    lines = path.read_text().splitlines(keepends=True)
    middle = len(lines) // 2
    lines[middle] = "X" + lines[middle]
    path.write_text("".join(lines))
    (problem,) = skills.check_drift(repo)
    assert (problem.rule, problem.line) == ("drift-content", middle + 1)
    assert "skills sync" in problem.message


def test_sync_leaves_the_rest_of_the_client_folders_alone(repo: Path) -> None:
    settings = repo / ".claude" / "settings.json"
    settings.write_text("{}\n")
    (repo / CLAUDE / "hand-made").mkdir()
    skills.sync(repo)
    assert settings.read_text() == "{}\n"
    assert not (repo / CLAUDE / "hand-made").exists()


def test_sync_refuses_invalid_canonical_skills_and_writes_nothing(repo: Path) -> None:
    skill_md = repo / "skills" / "automl-setup" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("name: automl-setup", "name: Automl-Setup"))
    before = _snapshot(repo / CLAUDE)
    with pytest.raises(SetupError) as caught:
        skills.sync(repo)
    assert "nothing was copied" in caught.value.message
    assert any("skills/automl-setup/SKILL.md:2: schema:" in d for d in caught.value.details)
    assert _snapshot(repo / CLAUDE) == before


def test_sync_refuses_to_write_through_a_symlinked_client_folder(repo: Path) -> None:
    elsewhere = repo / "elsewhere"
    shutil.move(repo / ".claude", elsewhere)
    (repo / ".claude").symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(elsewhere)
    with pytest.raises(SetupError, match="is a symlink"):
        skills.sync(repo)
    assert _snapshot(elsewhere) == before
    assert ("symlink", ".claude") in _rules(repo)


def test_manifest_lists_every_file_with_its_digest(repo: Path) -> None:
    result = skills.manifest(repo / "skills")
    assert result["skills"] == [
        "automl-experiments",
        "automl-setup",
        "automl-slurm",
        "automl-troubleshoot",
    ]
    files = {f["path"]: f for f in result["files"]}
    assert set(files) == {
        p.relative_to(repo / "skills").as_posix()
        for p in (repo / "skills").rglob("*")
        if p.is_file()
    }
    for rel, entry in files.items():
        data = (repo / "skills" / rel).read_bytes()
        assert entry == {"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    # The same bytes in a mirror digest the same.
    assert skills.manifest(repo / CLAUDE) == result


# --- the plugin manifests -------------------------------------------------------------------


def _with_manifests(repo: Path) -> Path:
    for rel in (".claude-plugin/plugin.json", ".codex-plugin/plugin.json"):
        (repo / rel).parent.mkdir(exist_ok=True)
        shutil.copy2(REPO / rel, repo / rel)
    return repo


def test_the_plugin_manifests_ship_exactly_the_canonical_skills(repo: Path) -> None:
    _with_manifests(repo)
    assert skills.check_repository(repo) == []
    shutil.copytree(repo / "skills" / "automl-slurm", repo / "skills" / "automl-extra")
    text = (repo / "skills/automl-extra/SKILL.md").read_text()
    (repo / "skills/automl-extra/SKILL.md").write_text(
        text.replace("name: automl-slurm", "name: automl-extra")
    )
    skills.sync(repo)
    problems = [p.format(repo) for p in skills.check_repository(repo)]
    assert len(problems) == 1 and problems[0].startswith(
        ".claude-plugin/plugin.json:1: plugin-skills"
    )
    assert '"./skills/automl-extra"' in problems[0]
    codex = repo / ".codex-plugin/plugin.json"
    codex.write_text(codex.read_text().replace('"./skills/"', '"./elsewhere/"'))
    rules = {(p.path.relative_to(repo).as_posix(), p.rule) for p in skills.check_repository(repo)}
    assert (".codex-plugin/plugin.json", "plugin-skills") in rules
    codex.write_text("{not json")
    rules = {(p.path.relative_to(repo).as_posix(), p.rule) for p in skills.check_repository(repo)}
    assert (".codex-plugin/plugin.json", "plugin-manifest") in rules


def test_the_manifests_carry_the_distribution_version_and_license() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for rel in (".claude-plugin/plugin.json", ".codex-plugin/plugin.json"):
        manifest = json.loads((REPO / rel).read_text())
        assert (manifest["name"], manifest["version"], manifest["license"]) == (
            project["name"],
            project["version"],
            project["license"],
        ), rel
    market = json.loads((REPO / ".claude-plugin/marketplace.json").read_text())
    assert [(p["name"], p["source"], p["version"]) for p in market["plugins"]] == [
        ("automl-setup", "./", project["version"])
    ]
    codex_market = json.loads((REPO / ".agents/plugins/marketplace.json").read_text())
    assert [p["source"] for p in codex_market["plugins"]] == [{"source": "local", "path": "./"}]
    assert (REPO / "LICENSE").read_text().split()[:3] == ["Apache", "License", "Version"]
