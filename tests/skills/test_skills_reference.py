"""`skills check` runs the Agent Skills reference validator (skills-ref) beside our rules; on
Python 3.10, where skills-ref cannot be installed (it needs 3.11), it says plainly that it ran
our rules alone."""

from __future__ import annotations

import platform
import shutil
import sys
from pathlib import Path

import pytest

from mcp_server.faces.cli.main import main
from mcp_server.skills.validate import validate_skill
from mcp_server.source.profile import tomllib

# skills-ref installs (and runs) on Python 3.11 or newer only.
HAS_REFERENCE = sys.version_info >= (3, 11)
needs_reference = pytest.mark.skipif(not HAS_REFERENCE, reason="skills-ref needs Python 3.11")

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "skills"

# Skills our rules accept and the reference validator rejects, with its finding as printed.
REFERENCE_ONLY = {
    "flow-metadata": (
        FIXTURES / "reference-rejects" / "flow-metadata",
        "4: skills-ref: Invalid YAML in frontmatter: While scanning",
    ),
    # We limit the description after collapsing whitespace, the reference before.
    "long-description": (
        FIXTURES / "pass" / "description-1024-collapsed" / "long-description",
        "1: skills-ref: Description exceeds 1024 character limit (1076 chars)",
    ),
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "skills", tmp_path / "skills")
    return tmp_path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@needs_reference
@pytest.mark.parametrize(("source", "finding"), REFERENCE_ONLY.values(), ids=REFERENCE_ONLY)
def test_a_skill_only_the_reference_rejects_fails_the_check(
    source: Path, finding: str, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skill = repo / "skills" / source.name
    shutil.copytree(source, skill)
    errors = [p for p in validate_skill(skill) if p.severity == "error"]
    assert errors == []  # our rules alone let it through ...
    skills_ref = pytest.importorskip("skills_ref")
    assert skills_ref.validate(skill) != []
    # ... so sync (our rules) copies it, and the check then fails on the reference's finding.
    assert main(["skills", "sync", "--root", str(repo)]) == 0
    capsys.readouterr()

    for paths in ([], [str(skill)]):
        assert main(["skills", "check", "--root", str(repo), *paths]) == 1
        out, _ = capsys.readouterr()
        lines = [line for line in out.splitlines() if ": warning " not in line]
        assert len(lines) == 2, out
        assert lines[0].startswith(f"skills/{source.name}/SKILL.md:{finding}")
        assert "; 1 errors, " in lines[-1]


@needs_reference
def test_the_committed_skills_pass_the_reference_validator() -> None:
    skills_ref = pytest.importorskip("skills_ref")
    for skill in sorted((REPO / "skills").iterdir()):
        assert skills_ref.validate(skill) == [], skill.name


@needs_reference
@pytest.mark.parametrize("with_paths", [False, True], ids=["repository", "paths"])
def test_without_skills_ref_check_refuses_naming_the_package(
    with_paths: bool,
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["skills", "sync", "--root", str(repo)]) == 0
    capsys.readouterr()
    before = _snapshot(repo)
    # None in sys.modules is how Python marks a module as not importable.
    monkeypatch.setitem(sys.modules, "skills_ref", None)
    argv = ["skills", "check", "--root", str(repo)]
    if with_paths:
        argv.append(str(repo / "skills"))

    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""  # no half report: our findings alone would look like a pass
    assert err.splitlines() == [
        "skills check: the Agent Skills reference validator (Python package skills-ref) "
        "is not installed",
        "  remedy: install it: pip install 'skills-ref>=0.1.1,<0.2' (Python 3.11 or newer; "
        "it comes with automl-setup's test extra: pip install -e '.[test]')",
    ]
    assert _snapshot(repo) == before


def test_dependencies_are_declared() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("markdown-it-py") for d in project["dependencies"])
    test_extra = project["optional-dependencies"]["test"]
    assert "skills-ref>=0.1.1,<0.2; python_version >= '3.11'" in test_extra


@pytest.mark.skipif(HAS_REFERENCE, reason="skills-ref runs on this Python")
@pytest.mark.parametrize("with_paths", [False, True], ids=["repository", "paths"])
def test_on_python_3_10_check_says_the_reference_was_skipped(
    with_paths: bool, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No skills-ref there (it cannot be installed): our rules run and decide the exit code,
    and a note on stderr says the reference did not run, and why; nothing is written."""
    assert main(["skills", "sync", "--root", str(repo)]) == 0
    capsys.readouterr()
    before = _snapshot(repo)
    argv = ["skills", "check", "--root", str(repo), *([str(repo / "skills")] if with_paths else [])]
    note = (
        "note: the Agent Skills reference validator (skills-ref) was skipped: it needs Python "
        f"3.11 or newer, this is {platform.python_version()}; only automl-setup's own rules "
        "checked the skills (run the check on Python 3.11+ for both)"
    )
    for extra in ([], ["--strict"], ["--format", "json"]):
        assert main([*argv, *extra]) == 0, extra
        out, err = capsys.readouterr()
        assert err.splitlines() == [note], extra
        assert "0 errors, 0 warnings" in out or '"errors": 0' in out, out
    skill = repo / "skills" / "automl-setup"
    (skill / "SKILL.md").write_text("no frontmatter\n")  # our rules still fail it
    assert main(argv) == 1
    assert "frontmatter" in capsys.readouterr()[0]
    (skill / "SKILL.md").write_bytes(before["skills/automl-setup/SKILL.md"])
    assert _snapshot(repo) == before
