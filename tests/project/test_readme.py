"""The README as a newcomer reads it, and as the index's project page shows it (the README is
the package's long description): the quick start's two commands, the routes in, and links that
resolve away from the repository."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from support.cli import REPO_ROOT

from mcp_server.skills.links import anchors, extract_links
from mcp_server.source.profile import tomllib

README = REPO_ROOT / "README.md"


def _repository() -> str:
    urls = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["urls"]
    return str(urls["Repository"]).rstrip("/")


def _bash_blocks(section: str) -> list[str]:
    """The ```bash blocks of the README's `## section`."""
    text = README.read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```", body, flags=re.M | re.S)


def test_the_quick_start_is_two_commands_the_first_without_the_test_extra() -> None:
    """One command sets up and runs the demo (not pulling the test extra it does not need),
    one installs what the tests need and runs them: exactly the command .ci/run runs."""
    setup, tests = (block.strip() for block in _bash_blocks("Quick start"))
    assert "\n" not in setup and "\n" not in tests
    assert setup.startswith("python3 -m venv .venv && ")
    assert setup.endswith(" && .venv/bin/automl-setup demo")
    assert "test" not in setup.split("&&")[1], setup
    assert tests == ".venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci


def test_the_routes_name_the_team_index_and_where_uv_comes_from() -> None:
    """Where the package comes from (a team's index, with the release page's how), the exact
    `--index` forms of `uv tool install` and `init`, and how to get uv."""
    text = README.read_text()
    section = text.split("\n## In your own project\n", 1)[1].split("\n## ", 1)[0]
    assert "your team's package index" in section
    assert f"{_repository()}/blob/main/docs/release.md#publishing-to-a-teams-own-index-instead" in (
        section
    )
    commands = "\n".join(_bash_blocks("In your own project"))
    index = "https://pypi.example.org/simple/"
    assert f"uv tool install --index {index} automl-setup" in commands
    assert f"automl-setup init --launcher uvx --index {index}" in commands
    assert "https://docs.astral.sh/uv/getting-started/installation/" in section


def test_every_link_is_absolute_and_those_into_the_repository_resolve() -> None:
    """On the index's project page a relative link leads nowhere: every README link is an
    absolute URL, and those into this repository ([project.urls] Repository, at main) name a
    file of this checkout and a heading of it."""
    repository = _repository()
    links = [link for link in extract_links(README.read_text()) if link.target is not None]
    assert len(links) >= 20
    relative = [(link.line, link.target) for link in links if "://" not in str(link.target)]
    assert relative == []
    unresolved: list[str] = []
    for link in links:
        target = str(link.target)
        for kind in ("blob", "tree"):
            prefix = f"{repository}/{kind}/main/"
            if target.startswith(prefix):
                break
        else:
            assert not target.startswith(repository + "/"), target
            continue
        parts = urlsplit(target.removeprefix(prefix))
        path = REPO_ROOT / unquote(parts.path)
        if not (path.is_file() if kind == "blob" else path.is_dir()):
            unresolved.append(f"line {link.line}: {target}: no such {kind} in the checkout")
        elif parts.fragment and parts.fragment not in anchors(Path(path).read_text()):
            unresolved.append(f"line {link.line}: {target}: no heading #{parts.fragment}")
    assert unresolved == []
