"""Markdown link and anchor check: relative links must name real files, `#anchors` real headings.

Links are resolved the way GitHub renders them: relative to the linking file, anchors
matched against GitHub-style heading slugs. The Markdown is parsed by markdown-it-py, a
CommonMark parser (with GitHub's tables), so a code span or block is never a link and a
reference definition is one wherever CommonMark says so. External http(s) links are only
syntax-checked, never fetched, so the check is offline and deterministic.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from mcp_server.fsutil import real_path

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
# What `automl-setup skills links` checks when given no paths, relative to the repository.
DEFAULT_LINK_TARGETS = ("README.md", "docs", "skills")
_ALLOWED_SCHEMES = frozenset({"http", "https", "mailto"})


# The Agent Skills specification's recommendations (and the clients' limits) rather than its
# requirements: reported as warnings, failing only under --strict. Every other rule is an error.
WARNING_RULES = frozenset(
    {"body-length", "nested-reference", "description-trigger", "description-long"}
)


@dataclass(frozen=True, order=True)
class Problem:
    """One finding, printed as `path:line: rule: message` (an error) or `path:line: warning
    rule: message` by every check of this package."""

    path: Path
    line: int
    rule: str
    message: str

    @property
    def severity(self) -> str:
        return "warning" if self.rule in WARNING_RULES else "error"

    def shown_path(self, base: Path | None = None) -> str:
        shown = self.path
        if base is not None:
            with contextlib.suppress(ValueError):  # outside base: keep the full path
                shown = self.path.relative_to(base)
        return shown.as_posix()

    def format(self, base: Path | None = None) -> str:
        grade = "warning " if self.severity == "warning" else ""
        return f"{self.shown_path(base)}:{self.line}: {grade}{self.rule}: {self.message}"


@dataclass
class Tally:
    """What a check looked at, for the counts every output ends with."""

    skills: int = 0
    files: int = 0
    links: int = 0
    anchors: int = 0


@dataclass(frozen=True)
class Link:
    line: int
    target: str | None  # None: a destination that does not parse, so no link renders


# --- parsing markdown -------------------------------------------------------------------


class _Parser(MarkdownIt):
    """CommonMark plus GitHub's tables, handing over every destination exactly as written."""

    def normalizeLink(self, url: str) -> str:
        return url  # not percent-encoded: messages quote the target the author wrote

    def validateLink(self, url: str) -> bool:
        return True  # `javascript:` must reach the scheme check, not silently become text


@cache
def _parser() -> MarkdownIt:
    # store_labels marks links that use a reference definition (the definition is checked
    # once, where it is written); inline_definitions keeps each definition as a token with
    # its line; text_join off keeps backslash escapes apart from plain text.
    options = {"store_labels": True, "inline_definitions": True}
    return _Parser("commonmark", options).enable("table").disable("text_join")


def _without_frontmatter(text: str) -> str:
    """YAML frontmatter blanked, line count kept: GitHub renders it as a table, not as
    headings or links, while CommonMark would read it as a rule and a setext heading."""
    lines = text.splitlines(keepends=True)
    if lines and lines[0].rstrip("\r\n") == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip() == "---":
                return "\n" * (i + 1) + "".join(lines[i + 1 :])
    return text


def _tokens(text: str) -> list[Token]:
    return _parser().parse(_without_frontmatter(text))


@dataclass(frozen=True)
class _Placed:
    """An inline token and the 1-based file line it starts on."""

    line: int
    token: Token


def _inline(block: Token) -> Iterator[_Placed]:
    """The children of an inline token, each with its line (the block's first line plus the
    line breaks before it)."""
    assert block.map is not None  # the block parser maps every inline token it emits
    line = block.map[0] + 1
    for child in block.children or []:
        yield _Placed(line, child)
        if child.type in {"softbreak", "hardbreak"}:
            line += 1
        elif child.type == "html_inline":
            line += child.content.count("\n")


class _HtmlAttributes(HTMLParser):
    """Start-tag attributes of an HTML fragment, each with its line inside the fragment."""

    def __init__(self, names: frozenset[str]) -> None:
        super().__init__(convert_charrefs=True)
        self._names = names
        self.found: list[tuple[int, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line = self.getpos()[0]
        self.found.extend((line, value) for name, value in attrs if name in self._names and value)


def _html_attributes(html: str, names: frozenset[str]) -> list[tuple[int, str]]:
    parser = _HtmlAttributes(names)
    parser.feed(html)
    parser.close()
    return parser.found


def _html_tokens(tokens: list[Token]) -> Iterator[tuple[int, str]]:
    """(first line, HTML) of every HTML block and inline tag outside code."""
    for token in tokens:
        if token.type == "html_block" and token.map is not None:
            yield token.map[0] + 1, token.content
        elif token.type == "inline":
            for placed in _inline(token):
                if placed.token.type == "html_inline":
                    yield placed.line, placed.token.content


# --- links ------------------------------------------------------------------------------

_LINK_ATTRS = frozenset({"href", "src"})
_ANCHOR_ATTRS = frozenset({"id", "name"})
# `](` left in plain text is a link CommonMark refused, as for `[a](b c)`: no link renders.
_REFUSED_LINK = re.compile(r"\]\(")


def _inline_links(block: Token) -> Iterator[Link]:
    for placed in _inline(block):
        token = placed.token
        if token.type in {"link_open", "image"} and "label" not in token.meta:
            href = token.attrGet("href" if token.type == "link_open" else "src")
            yield Link(placed.line, str(href or ""))
        elif token.type == "text":
            for _ in _REFUSED_LINK.finditer(token.content):
                yield Link(placed.line, None)


def extract_links(text: str) -> list[Link]:
    """Inline links and images, reference definitions, autolinks and HTML href/src."""
    tokens = _tokens(text)
    found: list[Link] = []
    for token in tokens:
        if token.type == "inline":
            found.extend(_inline_links(token))
        elif token.type == "definition" and token.map is not None:
            found.append(Link(token.map[0] + 1, token.meta["url"]))
    for line, html in _html_tokens(tokens):
        found.extend(
            Link(line + at - 1, value) for at, value in _html_attributes(html, _LINK_ATTRS)
        )
    # Stable: links on one line keep their order in the file.
    return sorted(found, key=lambda link: link.line)


# --- anchors ----------------------------------------------------------------------------


def _heading_text(block: Token) -> str:
    """The rendered text of a heading: code kept verbatim, link text kept, markup, HTML tags
    and images dropped, as in the heading's textContent that GitHub slugs."""
    parts: list[str] = []
    for placed in _inline(block):
        token = placed.token
        if token.type in {"text", "text_special", "code_inline"}:
            parts.append(token.content)
        elif token.type in {"softbreak", "hardbreak"}:
            parts.append("\n")
    return "".join(parts).strip()


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
    tokens = _tokens(text)
    headings = [
        _heading_text(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"
    ]
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
    # Explicit <a id=...> / <a name=...> targets, in HTML outside code.
    for _, html in _html_tokens(tokens):
        result.update(value for _, value in _html_attributes(html, _ANCHOR_ATTRS))
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
    tally: Tally = field(default_factory=Tally)
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
        self.tally.files += 1
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
        self.tally.links += 1  # a relative link: its target is checked on disk
        if path_part.startswith("/"):
            return ("link-absolute", f"{target}: absolute path; use a path relative to this file")
        try:  # real_path: Path.resolve() judges a symlink loop differently on each version
            resolved = real_path(source.parent / path_part if path_part else source)
            confine = real_path(self.confine)
        except OSError:  # ELOOP
            return ("link-target", f"{target}: a symlink loop")
        if resolved != confine and confine not in resolved.parents:
            return ("link-escape", f"{target}: leaves {self.confine.name}/")
        if not _exact_case_exists(resolved, confine):
            return ("link-target", f"{target}: no such file or directory")
        if not fragment:
            return None
        if resolved.is_dir() or resolved.suffix.lower() not in MARKDOWN_SUFFIXES:
            return ("link-anchor", f"{target}: an anchor can only be checked in a markdown file")
        self.tally.anchors += 1
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


def check_links(paths: Iterable[Path], confine: Path, tally: Tally | None = None) -> list[Problem]:
    """Check every markdown file under `paths`; links may not leave `confine`."""
    checker = LinkChecker(confine, tally or Tally())
    problems: list[Problem] = []
    for path in markdown_files(paths):
        problems.extend(checker.check_file(path))
    return problems
