"""Relative links and anchors in README.md, docs/ and skills/ resolve as GitHub renders them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_server.skills.links import (
    DEFAULT_LINK_TARGETS,
    anchors,
    check_links,
    default_link_targets,
    extract_links,
    github_slug,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Hello World!", "hello-world"),
        ("1. Ask which branch", "1-ask-which-branch"),
        ("Step 2: install", "step-2-install"),
        ("What's new?", "whats-new"),
        ("snake_case name", "snake_case-name"),
        ("a - b", "a---b"),
        ("C++ & Rust", "c--rust"),
        ("Ünïcödé Straße", "ünïcödé-straße"),
        ("🎉 Party", "-party"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_anchors_follow_rendered_heading_text_and_deduplicate() -> None:
    text = "\n".join(
        [
            "# Title #",
            "## Setup",
            "## Setup",
            "## Setup 1",
            "### The `--no-sync` flag",
            "## [Linked](x.md) *emphasis* and _under_ and `_code_`",
            "Setext heading",
            "==============",
            "- a list item",
            "---",
            "```",
            "# not a heading",
            "```",
            '<a id="custom-anchor"></a>',
        ]
    )
    assert anchors(text) == {
        "title",
        "setup",
        "setup-1",
        "setup-1-1",
        "the---no-sync-flag",
        "linked-emphasis-and-under-and-_code_",
        "setext-heading",
        "custom-anchor",
    }


def test_links_are_found_outside_code_only() -> None:
    text = "\n".join(
        [
            "---",
            "description: '[not](a-link.md)'",
            "---",
            "[a](one.md) ![b](two.png) [c](<with space.md>) [d](x_(y).md 'title')",
            "`[code](no.md)` <https://example.com> <a href='three.md'>x</a>",
            "```",
            "[fenced](no.md)",
            "```",
            "<!-- [commented](no.md) -->",
            "[ref]: four.md#part",
            "[wrapped",
            "text](five.md)",
        ]
    )
    assert [(link.line, link.target) for link in extract_links(text)] == [
        (4, "one.md"),
        (4, "two.png"),
        (4, "with space.md"),
        (4, "x_(y).md"),
        (5, "https://example.com"),
        (5, "three.md"),
        (10, "four.md#part"),
        (11, "five.md"),
    ]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "setup.md").write_text("# Setup\n\n## Install from a branch\n")
    (tmp_path / "docs" / "sub" / "data.txt").write_text("data\n")
    (tmp_path / "docs" / "with space.md").write_text("# Spaced\n")
    return tmp_path


GOOD_LINKS = [
    "setup.md",
    "setup.md#install-from-a-branch",
    "./setup.md#setup",
    "sub/",
    "sub/data.txt",
    "with%20space.md#spaced",
    "<with space.md>",
    "../docs/setup.md",
    "#local",
    "https://github.com/NVIDIA-TAO/tao-automl",
    "http://localhost:8080/x?y=1#z",
    "mailto:team@example.com",
]
BAD_LINKS = [
    ("missing.md", "link-target", "no such file"),
    ("Setup.md", "link-target", "no such file"),
    ("setup.md#nope", "link-anchor", "no heading with anchor #nope"),
    ("setup.md#Install-From-A-Branch", "link-anchor", "did you mean #install-from-a-branch"),
    ("#nowhere", "link-anchor", "#nowhere"),
    ("sub/data.txt#L1", "link-anchor", "only be checked in a markdown file"),
    ("sub/#x", "link-anchor", "only be checked in a markdown file"),
    ("../../outside.md", "link-escape", "leaves"),
    ("/docs/setup.md", "link-absolute", "absolute path"),
    ("https://", "link-syntax", "no valid host"),
    ("https://exa mple.com", "link-syntax", "malformed link destination"),
    ("with space.md", "link-syntax", "malformed link destination"),
    ('https://example.com/a"b', "link-syntax", "whitespace or one of"),
    ("http://host:port/", "link-syntax", "malformed URL"),
    ("//example.com/x", "link-syntax", "protocol-relative"),
    ("ftp://example.com/x", "link-syntax", "scheme 'ftp'"),
    ("javascript:alert(1)", "link-syntax", "scheme 'javascript'"),
    ("mailto:nobody", "link-syntax", "malformed mailto"),
    ("<unterminated", "link-syntax", "malformed link destination"),
    ("", "link-syntax", "empty link target"),
]


@pytest.mark.parametrize("target", GOOD_LINKS)
def test_good_link(target: str, docs: Path) -> None:
    page = docs / "docs" / "page.md"
    page.write_text(f"# Local\n\nSee [it]({target}).\n")
    assert check_links([page], confine=docs) == []


@pytest.mark.parametrize(("target", "rule", "fragment"), BAD_LINKS)
def test_bad_link(target: str, rule: str, fragment: str, docs: Path) -> None:
    page = docs / "docs" / "page.md"
    page.write_text(f"# Local\n\nSee [it]({target}).\n")
    problems = check_links([page], confine=docs)
    assert [(p.path, p.line, p.rule) for p in problems] == [(page, 3, rule)]
    assert fragment in problems[0].message


def test_a_link_into_a_symlink_loop_is_a_problem_on_every_version(docs: Path) -> None:
    """Path.resolve() raised on a loop up to Python 3.12 (a crash) and resolves it silently
    from 3.13 on; the check says the same on every version."""
    (docs / "docs" / "loop").symlink_to("loop")
    page = docs / "docs" / "page.md"
    page.write_text("# Local\n\nSee [it](loop/x.md) and [that](loop#top).\n")
    problems = check_links([page], confine=docs)
    assert [(p.line, p.rule) for p in problems] == [(3, "link-target"), (3, "link-target")]
    assert all("a symlink loop" in p.message for p in problems)


def test_folders_are_searched_for_markdown_only(docs: Path) -> None:
    (docs / "docs" / "notes.txt").write_text("[broken](missing.md)\n")
    (docs / "docs" / "sub" / "deep.md").write_text("[broken](missing.md)\n")
    problems = check_links([docs / "docs"], confine=docs)
    assert [p.path.name for p in problems] == ["deep.md"]


def test_non_utf8_markdown_is_a_problem_not_a_crash(docs: Path) -> None:
    (docs / "docs" / "latin1.md").write_bytes(b"# Caf\xe9\n")
    problems = check_links([docs / "docs"], confine=docs)
    assert [(p.path.name, p.rule) for p in problems] == [("latin1.md", "encoding")]


def test_default_targets_are_those_that_exist(tmp_path: Path) -> None:
    assert default_link_targets(tmp_path) == []
    (tmp_path / "skills").mkdir()
    (tmp_path / "README.md").write_text("# R\n")
    assert default_link_targets(tmp_path) == [tmp_path / "README.md", tmp_path / "skills"]


def test_repository_readme_docs_and_skills_pass() -> None:
    targets = default_link_targets(REPO)
    # Whatever of README.md, docs/ and skills/ exists is checked; skills/ always does.
    assert targets == [REPO / name for name in DEFAULT_LINK_TARGETS if (REPO / name).exists()]
    assert REPO / "skills" in targets
    problems = check_links(targets, confine=REPO)
    assert [p.format(REPO) for p in problems] == []


# --- what a CommonMark parser gets right and regular expressions got wrong ---------------

# Markdown that renders no link, though a pattern over the text sees one.
NOT_LINKS = {
    "indented code block": "Text.\n\n    [x](missing.md)\n",
    "fence in a blockquote": "> ```\n> [x](missing.md)\n> ```\n",
    "fence in a list item": "- item\n\n    ```\n    [x](missing.md)\n    ```\n",
    "code span": "Run `[x](missing.md)` and `` a ` [y](missing.md) ``.\n",
    "definition cannot interrupt a paragraph": "Some text\n[ref]: missing.md\n",
    "escaped brackets": "\\[x\\](missing.md)\n",
}

# Markdown that renders a link (to missing.md, on the line given), though a pattern misses it.
REAL_LINKS = {
    "between code spans holding comment marks": ("`<!--` [x](missing.md) `-->`\n", 1),
    "after backticks that open no fence": ("``` not`a fence\n[x](missing.md)\n", 2),
    "nested brackets": ("[a [b [c]] d](missing.md)\n", 1),
    "image inside a link": ("[![alt [x]](setup.md)](missing.md)\n", 1),
    "reference link": ("[guide][ref]\n\n[ref]: missing.md#part\n", 3),
    "reference definition in a blockquote": ("[guide][ref]\n\n> [ref]: missing.md\n", 3),
    "reference definition in a list item": ("[guide][ref]\n\n- [ref]: missing.md\n", 3),
    "destination on the next line": ("[guide][ref]\n\n[ref]:\n  missing.md\n", 3),
}


@pytest.mark.parametrize("markdown", NOT_LINKS.values(), ids=NOT_LINKS)
def test_code_and_non_links_are_not_checked(markdown: str, docs: Path) -> None:
    page = docs / "docs" / "page.md"
    page.write_text(markdown)
    assert extract_links(markdown) == []
    assert check_links([page], confine=docs) == []


@pytest.mark.parametrize(("markdown", "line"), REAL_LINKS.values(), ids=REAL_LINKS)
def test_every_rendered_link_is_checked(markdown: str, line: int, docs: Path) -> None:
    page = docs / "docs" / "page.md"
    page.write_text(markdown)
    problems = check_links([page], confine=docs)
    assert [(p.line, p.rule) for p in problems] == [(line, "link-target")]
    assert problems[0].message.startswith("missing.md")


def test_reference_links_check_their_definition_once(docs: Path) -> None:
    page = docs / "docs" / "page.md"
    page.write_text(
        "[one][good] [two][bad] [three][bad] ![img][bad]\n\n"
        "[good]: setup.md#install-from-a-branch\n"
        "[bad]: setup.md#nope\n"
    )
    problems = check_links([page], confine=docs)
    assert [(p.line, p.rule) for p in problems] == [(4, "link-anchor")]
    assert "no heading with anchor #nope" in problems[0].message


def test_html_anchors_are_read_as_html_attributes() -> None:
    text = "\n".join(
        [
            "<a id=bare></a>",
            '<a name="named"></a>',
            "",
            'Inline <span\n  id="multi-line">x</span> and <span data-id="not-an-id">y</span>',
            "",
            '`<a id="in-code">` and <!-- <a id="in-comment"> -->',
            "",
            "> # Quoted heading",
            "",
            "- ## Listed heading",
        ]
    )
    assert anchors(text) == {"bare", "named", "multi-line", "quoted-heading", "listed-heading"}


def test_links_to_html_anchors_resolve(docs: Path) -> None:
    (docs / "docs" / "anchors.md").write_text("# Anchors\n\n<a id=explicit></a>\n")
    page = docs / "docs" / "page.md"
    page.write_text("[a](anchors.md#explicit) [b](#here) <a name=here></a>\n")
    assert check_links([page], confine=docs) == []
