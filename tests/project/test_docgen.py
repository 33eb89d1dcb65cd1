"""The reference docs are generated from the code: the committed pages are exactly what
`python -m mcp_server.docgen` writes, `--check` says which page is stale and changes nothing,
and every command, tool and format appears in them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import REPO_ROOT
from support.trees import tree_digest

from mcp_server import docgen
from mcp_server.faces.registry import ROWS
from mcp_server.schemagen import formats


@pytest.fixture(scope="module")
def pages() -> dict[Path, str]:
    return docgen.generate()


def test_the_committed_reference_is_what_the_code_generates(pages: dict[Path, str]) -> None:
    stale = [p.name for p, text in pages.items() if p.read_text(encoding="utf-8") != text]
    assert stale == [], f"run `python -m mcp_server.docgen` and commit docs/reference/: {stale}"


def test_every_operation_tool_and_format_is_in_the_reference(pages: dict[Path, str]) -> None:
    cli, mcp, formats_page = (pages[docgen.REFERENCE_DIR / n] for n in docgen.PAGES)
    for row in ROWS:
        assert f"## automl-setup {row.command}\n" in cli, row.command
        assert f"## {row.tool}\n" in mcp, row.tool
        # The help's exit codes are the row's: 3 wherever an environment or experiment is named.
        section = cli.split(f"## automl-setup {row.command}\n")[1].split("\n## ")[0]
        for code, _meaning in row.exit_codes():
            assert f"| {code} |" in section, (row.command, code)
    for name in formats():
        assert f"## {name}\n" in formats_page, name


def test_check_names_a_stale_page_and_changes_nothing(tmp_path: Path) -> None:
    """`--check` against a copy of the repository's docs with one page edited."""
    copy = tmp_path / "reference"
    copy.mkdir()
    for page in docgen.PAGES:
        (copy / page).write_bytes((docgen.REFERENCE_DIR / page).read_bytes())
    (copy / "mcp.md").write_text("edited by hand\n", encoding="utf-8")
    before = tree_digest(copy)
    code = (
        "import sys; from pathlib import Path; from mcp_server import docgen; "
        f"docgen.REFERENCE_DIR = Path({str(copy)!r}); sys.exit(docgen.main(['--check']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )
    assert proc.returncode == 1, proc.stderr
    assert "mcp.md is stale: run `python -m mcp_server.docgen`" in proc.stderr
    assert "cli.md" not in proc.stderr and "formats.md" not in proc.stderr
    assert tree_digest(copy) == before  # --check wrote nothing
