"""Skill validation: every rule a skill folder must pass so that every client loads it.

A client drops a skill it cannot parse without a word, so the check applies the strictest
intersection of the clients' rules: the Agent Skills specification
(https://agentskills.io/specification) as a JSON Schema, plus strict YAML, the name/folder
match, body length, links and anchors, no hidden entries and no symlinks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from mcp_server.fsutil import real_path
from mcp_server.skills.links import LinkChecker, Problem, Tally, extract_links

SKILL_FILE = "SKILL.md"
MAX_BODY_LINES = 500
# Clients list every skill's description against a budget and cut what is longer (Claude Code
# shows 250 characters in /skills; Codex trims descriptions to fit its skills budget): a
# description over this many characters is a warning, over the specification's 1024 an error.
LONG_DESCRIPTION = 500
_TRIGGER = re.compile(r"\buse (?:this |it )?(?:skill )?when\b", re.IGNORECASE)
SCHEMA_PATH = Path(__file__).parent.parent / "schemas" / "skill-frontmatter.schema.json"


@cache
def frontmatter_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


# --- frontmatter ------------------------------------------------------------------------


@dataclass(frozen=True)
class Frontmatter:
    """The parsed frontmatter, the file line of every key, and the body that follows."""

    data: dict[str, Any]
    lines: dict[tuple[str, ...], int]
    body_first_line: int
    body: list[str]


class _FrontmatterError(Exception):
    def __init__(self, line: int, rule: str, message: str) -> None:
        super().__init__(message)
        self.line, self.rule, self.message = line, rule, message


_YAML_FIRST_LINE = 2  # file line of the first YAML line, right after the opening `---`
_STR = "tag:yaml.org,2002:str"
_JSON_SCALARS = {f"tag:yaml.org,2002:{t}" for t in ("int", "float", "bool", "null")}


def split_frontmatter(text: str) -> tuple[str, int, list[str]]:
    """(YAML text, file line of the first body line, body lines); raises _FrontmatterError."""
    if text.startswith("\ufeff"):
        raise _FrontmatterError(1, "frontmatter", "byte order mark before the opening '---'")
    if "\r" in text:
        line = text[: text.index("\r")].count("\n") + 1
        raise _FrontmatterError(line, "frontmatter", "carriage return: use LF line endings")
    lines = text.split("\n")
    if lines[0] != "---":
        raise _FrontmatterError(1, "frontmatter", "SKILL.md must start with a '---' line")
    try:
        close = lines.index("---", 1)
    except ValueError:
        raise _FrontmatterError(1, "frontmatter", "no closing '---' line") from None
    body = "\n".join(lines[close + 1 :]).splitlines()
    return "\n".join(lines[1:close]) + "\n", close + 2, body


def _yaml_line(mark: yaml.Mark | None) -> int:
    return (mark.line if mark is not None else 0) + _YAML_FIRST_LINE


def _scan_tokens(source: str) -> None:
    """Token-level rules: what parses here but not the same way (or not at all) elsewhere."""
    source_lines = source.split("\n")
    for token in yaml.scan(source, Loader=yaml.SafeLoader):
        line = _yaml_line(token.start_mark)
        if isinstance(token, (yaml.AnchorToken, yaml.AliasToken, yaml.TagToken)):
            kind = type(token).__name__.removesuffix("Token").lower()
            raise _FrontmatterError(line, "yaml", f"YAML {kind} not allowed in frontmatter")
        if isinstance(token, yaml.ScalarToken) and token.plain:
            if ": " in token.value or ":\t" in token.value:
                raise _FrontmatterError(line, "yaml", "unquoted value contains ': '; quote it")
            end = token.end_mark
            rest = source_lines[end.line][end.column :]
            if rest.lstrip().startswith("#"):
                raise _FrontmatterError(
                    _yaml_line(end),
                    "yaml",
                    "' #' after an unquoted value starts a comment and drops the rest; quote it",
                )


def _to_python(node: yaml.Node, path: tuple[str, ...], lines: dict[tuple[str, ...], int]) -> Any:
    """Strings, string-keyed mappings and lists of strings; JSON scalars pass to the schema."""
    line = _yaml_line(node.start_mark)
    lines.setdefault(path, line)
    if isinstance(node, yaml.ScalarNode):
        if node.tag == _STR:
            return node.value
        if node.tag in _JSON_SCALARS:
            # Kept as int/float/bool/None so the schema names the field and the wrong type.
            return yaml.SafeLoader("").construct_object(node)
        kind = node.tag.rsplit(":", 1)[-1]
        raise _FrontmatterError(line, "yaml", f"{node.value!r} is read as a {kind}; quote it")
    if isinstance(node, yaml.SequenceNode):
        items = []
        for item in node.value:
            if not (isinstance(item, yaml.ScalarNode) and item.tag == _STR):
                raise _FrontmatterError(
                    _yaml_line(item.start_mark), "yaml", "a list may hold only strings"
                )
            items.append(item.value)
        return items
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_line = _yaml_line(key_node.start_mark)
            if not (isinstance(key_node, yaml.ScalarNode) and key_node.tag == _STR):
                raise _FrontmatterError(key_line, "yaml", "keys must be plain strings")
            key = key_node.value
            if key in result:
                raise _FrontmatterError(key_line, "yaml", f"duplicate key {key!r}")
            where = (*path, key)
            lines[where] = key_line
            result[key] = _to_python(value_node, where, lines)
        return result
    raise _FrontmatterError(line, "yaml", "unsupported YAML node")  # pragma: no cover


def parse_frontmatter(text: str) -> Frontmatter:
    """Strict parse of a SKILL.md: raises _FrontmatterError with the file line of the fault."""
    source, body_first_line, body = split_frontmatter(text)
    try:
        _scan_tokens(source)
        node = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or exc.context or "invalid YAML"
        if "mapping values are not allowed" in reason:
            reason += " (an unquoted value contains ': '; quote it)"
        raise _FrontmatterError(_yaml_line(mark), "yaml", reason) from None
    if not isinstance(node, yaml.MappingNode):
        raise _FrontmatterError(_YAML_FIRST_LINE, "yaml", "frontmatter must be a mapping")
    lines: dict[tuple[str, ...], int] = {}
    data = _to_python(node, (), lines)
    return Frontmatter(data, lines, body_first_line, body)


def _schema_problems(path: Path, fm: Frontmatter) -> list[Problem]:
    schema = frontmatter_schema()
    instance = dict(fm.data)
    if isinstance(instance.get("description"), str):
        # Clients list the description on one line; the limits apply to that line.
        instance["description"] = " ".join(instance["description"].split())
    problems = []
    validator = jsonschema.Draft202012Validator(schema)
    for err in sorted(
        validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path]
    ):
        key = tuple(str(p) for p in err.absolute_path)
        line = next((fm.lines[key[:n]] for n in range(len(key), 0, -1) if key[:n] in fm.lines), 1)
        if err.validator == "additionalProperties" and not key:
            allowed = ", ".join(schema["properties"])
            for extra in sorted(set(instance) - set(schema["properties"])):
                message = f"field {extra!r} is not allowed; allowed fields: {allowed}"
                problems.append(Problem(path, fm.lines.get((extra,), 1), "schema", message))
            continue
        problems.append(Problem(path, line, "schema", _schema_message(key, err)))
    return problems


def _schema_message(key: tuple[str, ...], err: jsonschema.ValidationError) -> str:
    field = ".".join(key) or "frontmatter"
    value = err.instance
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    rule = err.schema.get("description", "") if isinstance(err.schema, dict) else ""
    if err.validator == "required":
        return err.message
    if err.validator == "type":
        hint = "" if isinstance(value, (dict, list)) else "; quote it"
        return f"{field}: must be a {err.validator_value}, got {shown}{hint}"
    if err.validator == "maxLength":
        assert isinstance(value, str)  # jsonschema checks the length of strings only
        collapsed = " after collapsing whitespace" if field == "description" else ""
        return f"{field}: {len(value)} characters{collapsed}, at most {err.validator_value}"
    if err.validator == "minLength":
        return f"{field}: must not be empty"
    if err.validator == "pattern":
        return f"{field}: {shown} breaks the rule: {rule}"
    return f"{field}: {err.message}"


# --- one skill, a folder of skills ------------------------------------------------------


def walk(root: Path) -> Iterator[Path]:
    """Every entry under `root`, parents first, never following a symlink."""
    for entry in sorted(root.iterdir()):
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from walk(entry)


def _layout_problems(skill_dir: Path) -> list[Problem]:
    problems = []
    for entry in walk(skill_dir):
        if entry.name.startswith("."):
            # Some clients skip hidden entries, others do not: the copies would differ.
            problems.append(Problem(entry, 1, "hidden-entry", "no hidden files or folders"))
        if entry.is_symlink():
            problems.append(Problem(entry, 1, "symlink", "no symlinks: use a real file"))
        elif not (entry.is_file() or entry.is_dir()):
            problems.append(Problem(entry, 1, "layout", "only regular files and folders"))
    return problems


def validate_skill(skill_dir: Path, tally: Tally | None = None) -> list[Problem]:
    """Every rule for one skill folder; an empty list means every client can load it."""
    tally = tally or Tally()
    tally.skills += 1
    if skill_dir.is_symlink():
        return [Problem(skill_dir, 1, "symlink", "skill folder is a symlink; use a real folder")]
    problems = _layout_problems(skill_dir)
    skill_md = skill_dir / SKILL_FILE
    if not skill_md.is_file() or skill_md.is_symlink():
        problems.append(Problem(skill_md, 1, "layout", f"missing {SKILL_FILE}"))
        return problems
    try:
        text = skill_md.read_bytes().decode("utf-8")  # bytes: keep any CR for the check
    except UnicodeDecodeError as exc:
        return [*problems, Problem(skill_md, 1, "encoding", f"not UTF-8: {exc.reason}")]
    try:
        fm = parse_frontmatter(text)
    except _FrontmatterError as exc:
        problems.append(Problem(skill_md, exc.line, exc.rule, exc.message))
    else:
        problems.extend(_schema_problems(skill_md, fm))
        name = fm.data.get("name")
        if isinstance(name, str) and name != skill_dir.name:
            message = f"name {name!r} differs from its folder {skill_dir.name!r}"
            problems.append(Problem(skill_md, fm.lines.get(("name",), 1), "name-folder", message))
        problems.extend(_description_advice(skill_md, fm))
        if len(fm.body) > MAX_BODY_LINES:
            line = fm.body_first_line + MAX_BODY_LINES
            message = f"body has {len(fm.body)} lines, at most {MAX_BODY_LINES}; move detail"
            message += " to references/"
            problems.append(Problem(skill_md, line, "body-length", message))
    # Links must stay inside the skill: it is copied, and may be installed, on its own.
    checker = LinkChecker(confine=skill_dir, tally=tally)
    skipped = {p.path for p in problems if p.rule in {"hidden-entry", "symlink"}}
    for md in walk(skill_dir):
        if md.suffix == ".md" and md.is_file() and not (skipped & {md, *md.parents}):
            problems.extend(checker.check_file(md))
            if md != skill_md:
                problems.extend(_nested_references(skill_dir, md))
    return problems


def _description_advice(skill_md: Path, fm: Frontmatter) -> list[Problem]:
    """The specification's advice on descriptions: say when to use the skill, and keep it
    short enough for the clients' lists."""
    description = fm.data.get("description")
    if not isinstance(description, str) or not description.strip():
        return []  # the schema reports it
    line = fm.lines.get(("description",), 1)
    collapsed = " ".join(description.split())
    problems = []
    if not _TRIGGER.search(collapsed):
        message = "description says what the skill does but not when: add 'Use when ...'"
        problems.append(Problem(skill_md, line, "description-trigger", message))
    if LONG_DESCRIPTION < len(collapsed) <= 1024:
        message = (
            f"description has {len(collapsed)} characters; clients cut long ones in their "
            f"skill lists: keep it under {LONG_DESCRIPTION}, with the trigger first"
        )
        problems.append(Problem(skill_md, line, "description-long", message))
    return problems


def _nested_references(skill_dir: Path, md: Path) -> list[Problem]:
    """References stay one level deep from SKILL.md: a reference that sends the reader on to
    another reference is a chain an agent may not follow."""
    problems = []
    text = md.read_text(encoding="utf-8", errors="replace")
    for link in extract_links(text):
        target = (link.target or "").split("#", 1)[0]
        if not target or ":" in target or target.startswith("/"):
            continue
        try:  # real_path: Path.resolve() judges a symlink loop differently on each version
            resolved = real_path(md.parent / target)
        except OSError:  # ELOOP: the link check reports it
            continue
        inside = resolved.is_relative_to(skill_dir.resolve())
        if (
            inside
            and resolved.suffix == ".md"
            and resolved not in (md.resolve(), (skill_dir / SKILL_FILE).resolve())
        ):
            message = (
                f"{target}: a reference linking to another reference; link it from {SKILL_FILE} "
                "instead (references one level deep)"
            )
            problems.append(Problem(md, link.line, "nested-reference", message))
    return problems


def skill_dirs(skills_root: Path) -> list[Path]:
    return sorted(p for p in skills_root.iterdir() if p.is_dir() or p.is_symlink())


def validate_skills_root(skills_root: Path, tally: Tally | None = None) -> list[Problem]:
    """Every skill in a folder of skills; anything else in that folder is a problem."""
    problems = []
    entries = sorted(skills_root.iterdir())
    for entry in entries:
        if entry.name.startswith("."):
            problems.append(Problem(entry, 1, "hidden-entry", "no hidden files or folders"))
        elif entry.is_symlink() or entry.is_dir():
            problems.extend(validate_skill(entry, tally))
        else:
            problems.append(Problem(entry, 1, "layout", "only skill folders belong here"))
    if not any(e.is_dir() for e in entries):
        problems.append(Problem(skills_root, 1, "layout", "no skills found"))
    return problems


def _enclosing_skill(path: Path) -> Path | None:
    """The skill folder a file belongs to: the nearest folder above it holding a SKILL.md."""
    for folder in path.absolute().parents:
        if (folder / SKILL_FILE).is_file():
            return folder
    return None


def _named(path: Path) -> list[tuple[Path, bool]]:
    """What a PATH of `skills check` names: (folder, whether it is a folder of skills) pairs.
    A SKILL.md or any other file of a skill names its skill (pre-commit passes the changed
    files); a file outside every skill names nothing."""
    if path.is_file():
        skill = path.parent if path.name == SKILL_FILE else _enclosing_skill(path)
        return [] if skill is None else [(skill, False)]
    if (path / SKILL_FILE).exists() or not _holds_skills(path):
        return [(path, False)]
    return [(path, True)]


def _named_all(paths: Sequence[Path]) -> list[tuple[Path, bool]]:
    return list(dict.fromkeys(pair for path in paths for pair in _named(path)))


def check_paths(paths: Sequence[Path], tally: Tally | None = None) -> list[Problem]:
    """`skills check PATH...`: each PATH is a skill's file, a skill folder or a folder of skills."""
    problems = []
    for folder, is_root in _named_all(paths):
        problems.extend(
            validate_skills_root(folder, tally) if is_root else validate_skill(folder, tally)
        )
    return problems


def skills_named(paths: Sequence[Path]) -> list[Path]:
    """The skill folders that `check_paths(paths)` validates."""
    found: list[Path] = []
    for folder, is_root in _named_all(paths):
        found.extend(skill_dirs(folder) if is_root else [folder])
    return found


def _holds_skills(folder: Path) -> bool:
    return any((p / SKILL_FILE).exists() for p in folder.iterdir() if p.is_dir())
