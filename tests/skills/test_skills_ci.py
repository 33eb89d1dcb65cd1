"""Skill validation for any repository's CI: a third-party layout (no mirrors), graded findings
with their rule, file and line, the CI formats (GitHub annotations, JSON against its schema),
the counts every format ends with, the settings table, and the real pre-commit hooks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from support.cli import REPO_ROOT, outside_env, run_cli
from support.engines import checkout_copy

from mcp_server import schemagen
from mcp_server.skills.settings import read_layout

GOOD = '---\nname: {name}\ndescription: "Formats tables. Use when the user asks for a table."\n---\n# {name}\n\nSee [the guide](references/guide.md#usage).\n'  # noqa: E501
GITHUB = re.compile(r"^::(error|warning) file=([^,]+),line=(\d+),title=([\w-]+)::(.+)$")
COUNTS = re.compile(
    r"^skills check: (ok|ok, with warnings|failed); (\d+) skills, (\d+) files, (\d+) links and "
    r"(\d+) anchors checked; (\d+) errors, (\d+) warnings$"
)


def skill(root: Path, name: str, text: str | None = None) -> Path:
    folder = root / "skills" / name
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(text or GOOD.format(name=name))
    (folder / "references" / "guide.md").write_text("# Guide\n\n## Usage\n\nUse it.\n")
    return folder / "SKILL.md"


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    """A third-party skills collection: skills/<name>/ only, no discovery copies."""
    root = tmp_path / "collection"
    for name in ("tables", "charts", "reports"):
        skill(root, name)
    return root


def check(root: Path, *args: str) -> tuple[int, str]:
    result = run_cli("skills", "check", "--root", str(root), *args)
    return result.code, result.stdout


def test_a_valid_collection_passes_with_counts_and_no_drift(collection: Path) -> None:
    code, out = check(collection)
    assert code == 0, out
    (line,) = out.splitlines()
    counts = COUNTS.match(line)
    assert counts is not None, line
    assert counts.groups() == ("ok", "3", "6", "3", "3", "0", "0")


def test_a_long_description_is_one_error_with_its_file_and_line(collection: Path) -> None:
    long = "Formats tables. Use when asked. " + "x" * 1068
    skill(collection, "verbose", f'---\nname: verbose\ndescription: "{long}"\n---\n# V\n')
    code, out = check(collection, "--format", "json")
    assert code == 1
    report = json.loads(out)
    jsonschema.validate(report, json.loads(schemagen.render(schemagen.record_models()[
        "skills-report.schema.json"])))  # fmt: skip
    (finding,) = report["findings"]  # ours; the reference validator's same finding is dropped
    assert (finding["file"], finding["line"], finding["rule"], finding["severity"]) == (
        "skills/verbose/SKILL.md",
        3,
        "schema",
        "error",
    )
    assert "1100 characters" in finding["message"]
    assert report["counts"]["errors"] == 1 and report["counts"]["skills"] == 4


def test_a_long_body_is_a_warning_that_fails_only_strict(collection: Path) -> None:
    body = "\n".join(f"Line {n}." for n in range(600))
    skill(collection, "long-body", GOOD.format(name="long-body") + body + "\n")
    code, out = check(collection)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("skills/long-body/SKILL.md:505: warning body-length: ")
    assert COUNTS.match(lines[-1]).groups()[0] == "ok, with warnings"  # type: ignore[union-attr]
    assert "drift" not in out
    code, out = check(collection, "--strict")
    assert code == 1 and out.splitlines()[-1].startswith("skills check: failed;")


def test_github_annotations_parse_line_by_line(collection: Path) -> None:
    text = GOOD.format(name="wrong-name").replace("references/guide.md#usage", "missing.md")
    skill(collection, "tables-two", text.replace("Use when the user asks", "For"))
    code, out = check(collection, "--format", "github")
    assert code == 1
    *annotations, last = out.splitlines()
    parsed = [GITHUB.match(line) for line in annotations]
    assert all(parsed), annotations
    found = {(m[1], m[2], m[3], m[4]) for m in parsed if m}
    assert ("error", "skills/tables-two/SKILL.md", "2", "name-folder") in found
    assert ("error", "skills/tables-two/SKILL.md", "7", "link-target") in found
    assert ("warning", "skills/tables-two/SKILL.md", "3", "description-trigger") in found
    assert COUNTS.match(last) is not None


def test_links_count_what_they_checked(collection: Path) -> None:
    (collection / "README.md").write_text("# Collection\n\n[tables](skills/tables/SKILL.md)\n")
    result = run_cli("skills", "links", "--root", str(collection), "--format", "json")
    assert result.code == 0
    counts = json.loads(result.stdout)["counts"]
    assert (counts["files"], counts["links"], counts["anchors"]) == (7, 4, 3)
    text = run_cli("skills", "links", "--root", str(collection)).stdout
    assert text == (
        "link check: ok; 0 skills, 7 files, 4 links and 3 anchors checked; 0 errors, 0 warnings\n"
    )


def test_the_settings_table_names_the_folder_and_required_mirrors(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "agent-skills" / "tables" / "references").mkdir(parents=True)
    (root / "agent-skills" / "tables" / "SKILL.md").write_text(GOOD.format(name="tables"))
    (root / "agent-skills" / "tables" / "references" / "guide.md").write_text("# G\n## Usage\n")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.automl-setup.skills]\nskills-dir = "agent-skills"\n'
        'mirrors = [".claude/skills"]\n'
    )
    code, out = check(root)
    assert code == 1 and ".claude/skills:1: drift-missing: missing" in out
    assert run_cli("config", "show", "--json", cwd=root).code == 0  # not an engine table
    (root / "pyproject.toml").write_text('[tool.automl-setup.skills]\nmirror = ["x"]\n')
    result = run_cli("skills", "check", "--root", str(root))
    assert result.code == 2 and "unknown keys mirror" in result.stderr


def test_this_repository_stays_strict_with_both_mirrors_required() -> None:
    layout = read_layout(REPO_ROOT, None, None)
    assert (layout.skills_dir, layout.mirrors) == ("skills", (".claude/skills", ".agents/skills"))
    code, out = check(REPO_ROOT, "--strict")
    assert code == 0, out


@pytest.mark.slow
def test_the_pre_commit_hook_from_this_checkout(tmp_path: Path) -> None:
    """The real pre-commit (the `test` extra's) runs the hook of .pre-commit-hooks.yaml from a
    clone of this repository (every change committed, as a tag a user pins would be)."""
    if sys.version_info < (3, 11):  # pyproject.toml: the test extra has it from 3.11 on only
        pytest.skip("the test extra's pre-commit (4.7) is installed on Python 3.11 or newer")
    hooks = checkout_copy(tmp_path / "automl-setup")
    fixed = {
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    env = {**outside_env(), **fixed, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}

    def git(cwd: Path, *args: str) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)

    git(hooks, "init", "-q")
    git(hooks, "add", "-A")
    git(hooks, "commit", "-q", "-m", "hooks")
    project = tmp_path / "project"
    skill(project, "tables")
    git(project, "init", "-q")
    git(project, "add", "-A")
    pre_commit = str(Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "pre-commit")
    if not Path(pre_commit).exists():
        pre_commit = str(Path(sys.executable).parent / "pre-commit")

    def run() -> subprocess.CompletedProcess[str]:
        argv = [pre_commit, "try-repo", str(hooks), "automl-setup-skills", "--all-files"]
        return subprocess.run(
            argv, cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False
        )

    passed = run()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    # One run with both faults (each in its own skill): the hook fails naming each.
    guide = project / "skills" / "tables" / "SKILL.md"
    guide.write_text(guide.read_text().replace("references/guide.md#usage", "references/gone.md"))
    skill(project, "charts", GOOD.format(name="graphs"))
    git(project, "add", "-A")
    broken = run()
    assert broken.returncode == 1
    assert "skills/tables/SKILL.md:7: link-target: references/gone.md" in broken.stdout
    assert "skills/charts/SKILL.md:2: name-folder: name 'graphs' differs" in broken.stdout
