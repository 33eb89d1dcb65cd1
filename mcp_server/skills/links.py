"""Markdown link and anchor check: relative links must name real files, `#anchors` real headings.

Links are resolved the way GitHub renders them: relative to the linking file, anchors
matched against GitHub-style heading slugs. External http(s) links are only
syntax-checked, never fetched, so the check is offline and deterministic.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
# What `automl-setup skills links` checks when given no paths, relative to the repository.
DEFAULT_LINK_TARGETS = ("README.md", "docs", "skills")
_ALLOWED_SCHEMES = frozenset({"http", "https", "mailto"})


@dataclass(frozen=True, order=True)
class Problem:
    """One finding, printed as `path:line: rule: message` by every check of this package."""

    path: Path
    line: int
    rule: str
    message: str

    def format(self, base: Path | None = None) -> str:
        shown = self.path
        if base is not None:
            with contextlib.suppress(ValueError):  # outside base: keep the full path
                shown = self.path.relative_to(base)
        return f"{shown.as_posix()}:{self.line}: {self.rule}: {self.message}"


@dataclass(frozen=True)
class Link:
    line: int
    target: str | None  # None: a destination that does not parse, so no link renders


# --- reading markdown -------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FRONTMATTER_END = re.compile(r"^---[ \t]*$")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def _blank(text: str) -> str:
    """Same length and line breaks, no content: keeps offsets and line numbers valid."""
    return re.sub(r"[^\n]", " ", text)


def _without_frontmatter(lines: list[str]) -> list[str]:
    # GitHub renders YAML frontmatter as a table, never as headings or links.
    if lines and lines[0].rstrip("\r\n") == "---":
        for i in range(1, len(lines)):
            if _FRONTMATTER_END.match(lines[i].rstrip("\r\n")):
                return ["\n"] * (i + 1) + lines[i + 1 :]
    return lines


def _without_fences(lines: list[str]) -> list[str]:
    out: list[str] = []
    fence: str | None = None
    for line in lines:
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                out.append("\n")
                continue
            out.append(line)
        else:
            closes = m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)
            if closes and not line.strip().lstrip(fence[0]):
                fence = None
            out.append("\n")
    return out


def _blocks(text: str) -> str:
    """The text with frontmatter, fenced code and HTML comments blanked out."""
    lines = _without_fences(_without_frontmatter(text.splitlines(keepends=True)))
    return _HTML_COMMENT.sub(lambda m: _blank(m.group(0)), "".join(lines))


def prose(text: str) -> str:
    """Like _blocks, and code spans blanked too: what is left may hold links."""

    def _span(m: re.Match[str]) -> str:
        # A code span never crosses a paragraph break.
        return m.group(0) if "\n\n" in m.group(0) else _blank(m.group(0))

    return _CODE_SPAN.sub(_span, _blocks(text))


# --- links ------------------------------------------------------------------------------

# `[text](` or `![alt](`; link text may hold one level of brackets (an image inside a link).
_INLINE_OPEN = re.compile(r"!?\[(?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*\]\(")
_REFERENCE_DEF = re.compile(r"^ {0,3}\[(?!\^)[^\]]+\]:[ \t]*(<[^>\n]*>|\S+)", re.MULTILINE)
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^\s<>]*)>", re.IGNORECASE)
_HTML_ATTR = re.compile(r"<[A-Za-z][^<>]*?\b(?:href|src)\s*=\s*[\"']([^\"']*)[\"']", re.DOTALL)


def _destination(text: str, start: int) -> str | None:
    """The link destination starting at `start` (just after `(`), or None when malformed."""
    i = start
    while i < len(text) and text[i] in " \t\n":
        i += 1
    if i < len(text) and text[i] == "<":
        end = text.find(">", i)
        return None if end < 0 or "\n" in text[i:end] else _unescape(text[i + 1 : end])
    depth = 0
    j = i
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c in " \t\n":
            break
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                break
            depth -= 1
        j += 1
    k = j
    while k < len(text) and text[k] in " \t\n":
        k += 1
    if k < len(text) and text[k] not in ")\"'(":
        return None  # `[a](b c)` renders as plain text, not as a link
    return _unescape(text[i:j])


def _unescape(destination: str) -> str:
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", destination)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def extract_links(text: str) -> list[Link]:
    """Inline links and images, reference definitions, autolinks and HTML href/src."""
    body = prose(text)
    found: list[tuple[int, str | None]] = []
    for m in _INLINE_OPEN.finditer(body):
        found.append((m.start(), _destination(body, m.end())))
    for m in _REFERENCE_DEF.finditer(body):
        found.append((m.start(1), m.group(1).strip("<>")))
    for m in _AUTOLINK.finditer(body):
        found.append((m.start(1), m.group(1)))
    for m in _HTML_ATTR.finditer(body):
        found.append((m.start(1), m.group(1)))
    found.sort(key=lambda item: item[0])
    return [Link(_line_of(body, off), target) for off, target in found]


# --- anchors ----------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^ {0,3}(?:#|>|[-*+][ \t]|\d+[.)][ \t]|\|)")
_HTML_ID = re.compile(r"<[A-Za-z][^<>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']")
_INLINE_LINK_TEXT = re.compile(r"!\[[^\]]*\]\([^)]*\)|\[([^\]]*)\]\([^)]*\)")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_EMPHASIS_UNDERSCORE = re.compile(r"(?<![\w])_+|_+(?![\w])")


def _heading_text(raw: str) -> str:
    """The rendered text of a heading: code kept verbatim, link text kept, markup dropped."""
    parts = re.split(r"(`+)(.+?)\1", raw)
    # re.split with two groups yields [text, ticks, code, text, ticks, code, ..., text].
    out: list[str] = []
    for i, part in enumerate(parts):
        kind = i % 3
        if kind == 1:
            continue
        if kind == 2:
            out.append(part.strip() or part)
            continue
        part = _INLINE_LINK_TEXT.sub(lambda m: m.group(1) or "", part)
        part = _HTML_TAG.sub("", part)
        part = _EMPHASIS_UNDERSCORE.sub("", part)
        out.append(part.replace("\\", ""))
    return "".join(out).strip()


def github_slug(text: str) -> str:
    """GitHub's heading id (github-slugger): lowercase; keep letters, marks, digits, `_`, `-`,
    and spaces, which become hyphens. Repeated hyphens are kept, as GitHub keeps them."""
    kept = (
        c
        for c in text.lower()
        if c in " -_" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc"
    )
    return "".join(kept).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every fragment a link may target in this markdown text, deduplicated like GitHub."""
    lines = _blocks(text).splitlines()  # code spans kept: their text is part of the slug
    headings: list[str] = []
    for i, line in enumerate(lines):
        m = _ATX.match(line)
        if m:
            headings.append(_heading_text(m.group(2) or ""))
            continue
        prev = lines[i - 1] if i else ""
        underline = _SETEXT.match(line) and not _SETEXT.match(prev)
        if underline and prev.strip() and not _NOT_PARAGRAPH.match(prev):
            headings.append(_heading_text(prev.strip()))
    seen: dict[str, int] = {}
    result: set[str] = set()
    for heading in headings:
        # github-slugger: a repeat gets -1, -2, ...; skip suffixes already taken.
        base = github_slug(heading)
        slug = base
        while slug in seen:
            seen[base] += 1
            slug = f"{base}-{seen[base]}"
        seen[slug] = 0
        result.add(slug)
    result.update(_HTML_ID.findall(prose(text)))
    return result


# --- checking ---------------------------------------------------------------------------


def _external_problem(target: str) -> str | None:
    parts = urlsplit(target)
    scheme = parts.scheme.lower()
    if scheme not in _ALLOWED_SCHEMES:
        return f"scheme {scheme!r} is not allowed (use https, http, mailto or a relative path)"
    if re.search(r"[\s<>\"`]", target):
        return 'URL contains whitespace or one of < > " `'
    if scheme == "mailto":
        return None if re.fullmatch(r"[^@\s]+@[^@\s]+", parts.path) else "malformed mailto"
    try:
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as exc:
        return f"malformed URL: {exc}"
    if not host or not re.fullmatch(r"[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]", host):
        return "URL has no valid host"
    return None


def _exact_case_exists(path: Path, base: Path) -> bool:
    """`path` exists below `base` with exactly this spelling of every name."""
    # Case-insensitive file systems accept `Readme.md` for `README.md`; GitHub does not.
    if not path.exists():
        return False
    current = base
    for name in path.relative_to(base).parts:
        if name not in {entry.name for entry in current.iterdir()}:
            return False
        current = current / name
    return True


@dataclass
class LinkChecker:
    """Checks markdown files; `confine` is the folder links may not leave (repository, skill)."""

    confine: Path
    _anchor_cache: dict[Path, set[str]] = field(default_factory=dict, init=False, repr=False)

    def _anchors_of(self, path: Path) -> set[str]:
        key = path.resolve()
        if key not in self._anchor_cache:
            # A target that is not UTF-8 is reported when it is checked itself.
            text = path.read_text(encoding="utf-8", errors="replace")
            self._anchor_cache[key] = anchors(text)
        return self._anchor_cache[key]

    def check_file(self, path: Path) -> list[Problem]:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            return [Problem(path, 1, "encoding", f"not UTF-8: {exc.reason}")]
        self._anchor_cache[path.resolve()] = anchors(text)
        problems: list[Problem] = []
        for link in extract_links(text):
            message = self._check_link(path, link.target)
            if message is not None:
                problems.append(Problem(path, link.line, message[0], message[1]))
        return problems

    def _check_link(self, source: Path, target: str | None) -> tuple[str, str] | None:
        if target is None:
            message = "malformed link destination: write spaces as %20 or wrap it in <...>"
            return ("link-syntax", message)
        if not target.strip():
            return ("link-syntax", "empty link target")
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
            problem = _external_problem(target)
            return None if problem is None else ("link-syntax", f"{target}: {problem}")
        if target.startswith("//"):
            return ("link-syntax", f"{target}: protocol-relative URL; write https://")
        parts = urlsplit(target)
        path_part, fragment = unquote(parts.path), unquote(parts.fragment)
        if path_part.startswith("/"):
            return ("link-absolute", f"{target}: absolute path; use a path relative to this file")
        resolved = (source.parent / path_part).resolve() if path_part else source.resolve()
        confine = self.confine.resolve()
        if resolved != confine and confine not in resolved.parents:
            return ("link-escape", f"{target}: leaves {self.confine.name}/")
        if not _exact_case_exists(resolved, confine):
            return ("link-target", f"{target}: no such file or directory")
        if not fragment:
            return None
        if resolved.is_dir() or resolved.suffix.lower() not in MARKDOWN_SUFFIXES:
            return ("link-anchor", f"{target}: an anchor can only be checked in a markdown file")
        known = self._anchors_of(resolved)
        if fragment in known:
            return None
        hint = next((a for a in sorted(known) if a.lower() == fragment.lower()), None)
        suffix = f" (did you mean #{hint}?)" if hint else ""
        return ("link-anchor", f"{target}: no heading with anchor #{fragment}{suffix}")


def markdown_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The markdown files named, and those under the folders named, in a stable order."""
    for path in paths:
        if path.is_dir():
            yield from sorted(
                p for p in path.rglob("*") if p.suffix.lower() in MARKDOWN_SUFFIXES and p.is_file()
            )
        else:
            yield path


def default_link_targets(repo_root: Path) -> list[Path]:
    """README.md, docs/ and skills/ of a repository: those of them that exist."""
    return [repo_root / name for name in DEFAULT_LINK_TARGETS if (repo_root / name).exists()]


def check_links(paths: Iterable[Path], confine: Path) -> list[Problem]:
    """Check every markdown file under `paths`; links may not leave `confine`."""
    checker = LinkChecker(confine)
    problems: list[Problem] = []
    for path in markdown_files(paths):
        problems.extend(checker.check_file(path))
    return problems
