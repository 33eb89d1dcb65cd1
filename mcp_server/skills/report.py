"""The findings of `skills check` and `skills links` for people and for CI: graded, counted, and
printed as text, one JSON document (schemas/skills-report.schema.json) or GitHub workflow
annotations; every format ends with the counts. The reference validator's finding of the same
fault our rules report is dropped, so one fault is one finding."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.skills.links import Problem, Tally

Format = Literal["text", "json", "github"]
FORMATS: tuple[Format, ...] = ("text", "json", "github")
Severity = Literal["error", "warning"]
_REFERENCE_RULE = "skills-ref"
# The frontmatter field a reference validator's message is about, by its opening words.
_REFERENCE_TOPICS = (
    (re.compile(r"^description\b", re.I), "description"),
    (re.compile(r"^(skill name|directory name|name)\b", re.I), "name"),
    (re.compile(r"^unexpected fields\b", re.I), "field"),
    (re.compile(r"^compatibility\b", re.I), "compatibility"),
    (re.compile(r"^metadata\b", re.I), "metadata"),
)


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    file: str = Field(description="The file, relative to the repository root when inside it.")
    line: int = Field(description="Its line (1 when a finding is about the whole file).")
    rule: str = Field(description="The rule id (docs/skills.md lists them).")
    severity: Severity = Field(description="error: the specification requires it; warning: it "
                               "recommends it (fails only with --strict).")  # fmt: skip
    message: str


class Counts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    skills: int = Field(description="Skill folders checked.")
    files: int = Field(description="Markdown files whose links were checked.")
    links: int = Field(description="Relative links checked against the files on disk.")
    anchors: int = Field(description="#anchors checked against the headings of their file.")
    errors: int
    warnings: int


class SkillsReport(BaseModel):
    """What `skills check --format json` and `skills links --format json` print."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    command: Literal["check", "links"]
    root: str = Field(description="The repository root.")
    strict: bool = Field(description="Whether warnings fail (--strict).")
    ok: bool = Field(description="No error, and no warning under --strict: exit 0.")
    findings: list[Finding]
    counts: Counts


def _topic(problem: Problem) -> str | None:
    if problem.rule == "name-folder":
        return "name"
    if problem.rule != "schema":
        return None
    head = problem.message.split(":", 1)[0]
    return "field" if head.startswith("field ") else head.split(".", 1)[0]


def without_repeats(problems: list[Problem]) -> list[Problem]:
    """Ours and the reference validator's findings, less the reference's report of a fault one
    of our rules already names in the same file (the same frontmatter field)."""
    ours = {(p.path, _topic(p)) for p in problems if p.rule != _REFERENCE_RULE}
    kept = []
    for problem in problems:
        if problem.rule == _REFERENCE_RULE:
            topic = next((t for rx, t in _REFERENCE_TOPICS if rx.match(problem.message)), None)
            if topic is not None and (problem.path, topic) in ours:
                continue
        kept.append(problem)
    return kept


def build_report(
    command: Literal["check", "links"],
    root: Path,
    problems: list[Problem],
    tally: Tally,
    strict: bool,
) -> SkillsReport:
    findings = [
        Finding(
            file=p.shown_path(root),
            line=p.line,
            rule=p.rule,
            severity="warning" if p.severity == "warning" else "error",
            message=p.message,
        )
        for p in without_repeats(problems)
    ]
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    counts = Counts(
        skills=tally.skills,
        files=tally.files,
        links=tally.links,
        anchors=tally.anchors,
        errors=errors,
        warnings=warnings,
    )
    ok = errors == 0 and not (strict and warnings)
    return SkillsReport(
        command=command, root=str(root), strict=strict, ok=ok, findings=findings, counts=counts
    )


def summary(report: SkillsReport) -> str:
    """The last line of every format: the verdict and the counts."""
    c = report.counts
    what = "skills check" if report.command == "check" else "link check"
    verdict = (
        "ok" if report.ok and not c.warnings else "ok, with warnings" if report.ok else ("failed")
    )
    return (
        f"{what}: {verdict}; {c.skills} skills, {c.files} files, {c.links} links and "
        f"{c.anchors} anchors checked; {c.errors} errors, {c.warnings} warnings"
    )


def _escape(text: str, *, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (properties also escape ':' and ',')."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def render(report: SkillsReport, fmt: Format) -> str:
    if fmt == "json":
        return report.model_dump_json(indent=2)
    lines = []
    for f in report.findings:
        if fmt == "github":
            file, title = _escape(f.file, prop=True), _escape(f.rule, prop=True)
            where = f"file={file},line={f.line},title={title}"
            lines.append(f"::{f.severity} {where}::{_escape(f.message)}")
        else:
            grade = "warning " if f.severity == "warning" else ""
            lines.append(f"{f.file}:{f.line}: {grade}{f.rule}: {f.message}")
    return "\n".join([*lines, summary(report)])
