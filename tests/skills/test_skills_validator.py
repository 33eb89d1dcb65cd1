"""Every validator rule: a fixture that breaks it and one that passes at its boundary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml

from mcp_server.skills import validate as skills
from mcp_server.skills.links import Problem

FIXTURES = Path(__file__).parents[1] / "fixtures" / "skills"
PASS_CASES = sorted(p.name for p in (FIXTURES / "pass").iterdir())
VALID_SKILL_MD = '---\nname: demo\ndescription: "Does one thing."\n---\n# Demo\n'

# fail case -> (rule, path inside the case folder, line, part of the message)
FAIL_CASES: dict[str, tuple[str, str, int, str]] = {
    "name-uppercase": ("schema", "Bad-Name/SKILL.md", 2, "name: 'Bad-Name' breaks the rule"),
    "name-double-hyphen": ("schema", "pdf--tools/SKILL.md", 2, "single hyphens"),
    "name-trailing-hyphen": ("schema", "pdf-/SKILL.md", 2, "no leading or trailing hyphen"),
    "name-65": ("schema", f"{'a' * 32}-{'b' * 32}/SKILL.md", 2, "name: 65 characters, at most 64"),
    "name-folder-mismatch": ("name-folder", "alpha/SKILL.md", 2, "'beta' differs from its folder"),
    "name-integer": ("schema", "numeric/SKILL.md", 2, "name: must be a string, got 123"),
    "name-boolean": ("schema", "boolean/SKILL.md", 2, "name: must be a string, got True"),
    "description-missing": ("schema", "no-description/SKILL.md", 1, "'description' is a required"),
    "description-empty": ("schema", "empty-description/SKILL.md", 3, "must not be empty"),
    "description-1025": ("schema", "long-description/SKILL.md", 3, "1025 characters after"),
    "description-angle-brackets": ("schema", "angle/SKILL.md", 3, "no < or >"),
    "unknown-field": ("schema", "unknown-field/SKILL.md", 4, "field 'model' is not allowed"),
    "compatibility-501": ("schema", "compat/SKILL.md", 4, "compatibility: 501 characters"),
    "metadata-number": ("schema", "metadata/SKILL.md", 5, "metadata.version: must be a string"),
    "metadata-nested": ("schema", "metadata-nested/SKILL.md", 5, "metadata.owner: must be a"),
    "allowed-tools-list": ("schema", "tools-list/SKILL.md", 4, "allowed-tools: must be a string"),
    "yaml-unquoted-colon": ("yaml", "unquoted-colon/SKILL.md", 3, "mapping values are not allowed"),
    "yaml-duplicate-key": ("yaml", "duplicate/SKILL.md", 4, "duplicate key 'description'"),
    "yaml-trailing-comment": ("yaml", "comment/SKILL.md", 3, "starts a comment"),
    "yaml-date": ("yaml", "dated/SKILL.md", 5, "read as a timestamp; quote it"),
    "yaml-anchor": ("yaml", "anchor/SKILL.md", 2, "anchor not allowed"),
    "yaml-tag": ("yaml", "tagged/SKILL.md", 2, "tag not allowed"),
    "yaml-not-mapping": ("yaml", "not-mapping/SKILL.md", 2, "must be a mapping"),
    "frontmatter-missing": ("frontmatter", "no-frontmatter/SKILL.md", 1, "must start with"),
    "frontmatter-unclosed": ("frontmatter", "unclosed/SKILL.md", 1, "no closing '---'"),
    "body-501-lines": ("body-length", "body-501/SKILL.md", 505, "body has 501 lines"),
    "link-missing-file": ("link-target", "missing-file/SKILL.md", 7, "references/guide.md"),
    "link-missing-anchor": ("link-anchor", "missing-anchor/SKILL.md", 9, "#set-up"),
    "link-missing-anchor-in-file": ("link-anchor", "missing-anchor-file/SKILL.md", 7, "#step-3"),
    "link-escapes-skill": ("link-escape", "escapes/SKILL.md", 7, "leaves escapes/"),
    "link-absolute": ("link-absolute", "absolute/SKILL.md", 7, "/etc/passwd"),
    "link-bad-url": ("link-syntax", "bad-url/SKILL.md", 7, "no valid host"),
    "link-bad-scheme": ("link-syntax", "bad-scheme/SKILL.md", 7, "scheme 'file'"),
    "link-wrong-case": ("link-target", "wrong-case/SKILL.md", 7, "references/Guide.md"),
    "missing-skill-md": ("layout", "no-skill-md/SKILL.md", 1, "missing SKILL.md"),
    "stray-file": ("layout", "notes.txt", 1, "only skill folders"),
}


def _errors(problems: list[Problem], rule: str = "") -> list[Problem]:
    """The errors (and the findings of `rule`): the fixtures test one rule each, and most of
    their descriptions lack the 'Use when' a warning asks for."""
    return [p for p in problems if p.severity == "error" or p.rule == rule]


def _copy(case: Path, tmp_path: Path) -> Path:
    target = tmp_path / case.name
    shutil.copytree(case, target, symlinks=True)
    return target


def _one_skill(tmp_path: Path, text: str | bytes, name: str = "demo") -> Path:
    skill = tmp_path / "skills" / name
    skill.mkdir(parents=True)
    path = skill / "SKILL.md"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return skill


def test_every_fail_fixture_has_an_expectation() -> None:
    assert sorted(FAIL_CASES) == sorted(p.name for p in (FIXTURES / "fail").iterdir())


@pytest.mark.parametrize("case", PASS_CASES)
def test_pass_fixture(case: str, tmp_path: Path) -> None:
    root = _copy(FIXTURES / "pass" / case, tmp_path)
    assert _errors(skills.validate_skills_root(root)) == []


@pytest.mark.parametrize("case", sorted(FAIL_CASES))
def test_fail_fixture(case: str, tmp_path: Path) -> None:
    rule, rel, line, fragment = FAIL_CASES[case]
    root = _copy(FIXTURES / "fail" / case, tmp_path)
    problems = _errors(skills.validate_skills_root(root), rule)
    assert len(problems) == 1, [p.format(root) for p in problems]
    (problem,) = problems
    assert (problem.rule, problem.path, problem.line) == (rule, root / rel, line)
    assert fragment in problem.message
    # The printed form every face shows: path:line: rule: message (a warning says so)
    grade = "warning " if problem.severity == "warning" else ""
    assert problem.format(root) == f"{rel}:{line}: {grade}{rule}: {problem.message}"


def test_boundaries_of_the_pass_fixtures_are_exact() -> None:
    n64 = next((FIXTURES / "pass" / "name-64").iterdir()).name
    assert len(n64) == 64
    text = (FIXTURES / "pass/description-1024-collapsed/long-description/SKILL.md").read_text()
    description = yaml.safe_load(text.split("---\n")[1])["description"]
    assert len(description) > 1024 and len(" ".join(description.split())) == 1024
    body = (FIXTURES / "pass/body-500-lines/body-500/SKILL.md").read_text().split("---\n", 2)[2]
    assert len(body.splitlines()) == 500


def test_pyyaml_itself_rejects_a_bare_colon_in_a_plain_scalar() -> None:
    # The brief's example: PyYAML raises, so the strict parse does too, at the right line.
    with pytest.raises(yaml.scanner.ScannerError, match="mapping values are not allowed"):
        yaml.safe_load("description: foo: bar")
    with pytest.raises(skills._FrontmatterError) as caught:
        skills.parse_frontmatter("---\nname: x\ndescription: foo: bar\n---\n")
    assert (caught.value.rule, caught.value.line) == ("yaml", 3)


@pytest.mark.parametrize(
    ("text", "rule", "line", "fragment"),
    [
        ("\ufeff" + VALID_SKILL_MD, "frontmatter", 1, "byte order mark"),
        (VALID_SKILL_MD.replace("\n", "\r\n"), "frontmatter", 1, "use LF"),
        (b"---\nname: demo\ndescription: caf\xe9\n---\n", "encoding", 1, "not UTF-8"),
        ('---\nname: demo\ndescription: "x"\n"1": y\n---\n', "schema", 4, "field '1'"),
        ("---\nname: demo\ndescription: [a, {b: c}]\n---\n", "yaml", 3, "only strings"),
        ("---\nname: demo\ndescription: x\n? [a]\n: b\n---\n", "yaml", 4, "plain strings"),
        ("---\n---\n", "yaml", 2, "must be a mapping"),
    ],
)
def test_generated_failures(
    text: str | bytes, rule: str, line: int, fragment: str, tmp_path: Path
) -> None:
    skill = _one_skill(tmp_path, text)
    problems = _errors(skills.validate_skill(skill))
    assert [(p.rule, p.line) for p in problems] == [(rule, line)], problems
    assert fragment in problems[0].message


def test_a_clean_generated_skill_passes(tmp_path: Path) -> None:
    assert _errors(skills.validate_skill(_one_skill(tmp_path, VALID_SKILL_MD))) == []


@pytest.mark.parametrize("entry", [".hidden/notes.md", "references/.cache/x.txt", ".DS_Store"])
def test_hidden_entries_are_rejected(entry: str, tmp_path: Path) -> None:
    skill = _one_skill(tmp_path, VALID_SKILL_MD)
    path = skill / entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# hidden\n")
    rules = {
        (p.rule, p.path.relative_to(skill).as_posix())
        for p in _errors(skills.validate_skill(skill))
    }
    hidden = next(part for part in Path(entry).parts if part.startswith("."))
    top = entry[: entry.index(hidden) + len(hidden)]
    assert rules == {("hidden-entry", top)}


def test_symlinks_are_rejected_inside_and_as_the_skill(tmp_path: Path) -> None:
    skill = _one_skill(tmp_path, VALID_SKILL_MD)
    (skill / "real.md").write_text("# Real\n")
    (skill / "linked.md").symlink_to("real.md")
    problems = _errors(skills.validate_skill(skill))
    assert [(p.rule, p.path.name) for p in problems] == [("symlink", "linked.md")]

    linked_skill = tmp_path / "skills" / "other"
    linked_skill.symlink_to(skill, target_is_directory=True)
    problems = _errors(skills.validate_skill(linked_skill))
    assert [(p.rule, p.path) for p in problems] == [("symlink", linked_skill)]


def test_check_paths_accepts_a_skill_md_a_skill_or_a_folder_of_skills(tmp_path: Path) -> None:
    skill = _one_skill(tmp_path, VALID_SKILL_MD)
    broken = _one_skill(tmp_path, "no frontmatter\n", name="broken")
    assert _errors(skills.check_paths([skill / "SKILL.md"])) == []
    assert _errors(skills.check_paths([skill])) == []
    found = _errors(skills.check_paths([tmp_path / "skills"]))
    assert [p.path for p in found] == [broken / "SKILL.md"]


def test_schema_file_is_valid_and_lists_exactly_the_allowed_fields() -> None:
    schema = json.loads(skills.SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert list(schema["properties"]) == [
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowed-tools",
    ]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["name", "description"]


def test_problem_is_shared_with_the_link_check() -> None:
    # One finding type for both checks, so both print the same way.
    assert skills.Problem is Problem
