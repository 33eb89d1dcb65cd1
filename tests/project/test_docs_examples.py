"""Docs that are true: every `console` example of docs/ whose command is
`$ automl-setup ...` runs, in order, in a project whose pyproject.toml names a reference
repository (create_reference_repository), and its output has the documented shape: the same
JSON keys, or line by line the same indentation and first word (digits aside; a repeated
row, such as a table's, counts once). setup.md runs first: its install is the one install."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from support.cli import REPO_ROOT, run_cli

from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, create_reference_repository

pytestmark = pytest.mark.slow

DOCS = REPO_ROOT / "docs"
FIRST = "setup.md"  # the install the other pages' examples need
EXAMPLE = REPO_ROOT / "mcp_server" / "reference_engine" / "examples" / "quadratic.yaml"


def console_examples() -> list[tuple[str, str, str]]:
    """(page, command line, documented output) of every `$ automl-setup` line, in order."""
    pages = sorted(DOCS.glob("*.md"), key=lambda p: (p.name != FIRST, p.name))
    found: list[tuple[str, str, str]] = []
    for page in pages:
        for block in re.findall(r"^```console\n(.*?)^```", page.read_text(), re.M | re.S):
            for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
                command, _, output = chunk.partition("\n")
                if command.startswith("automl-setup "):
                    found.append((page.name, command, output))
    return found


def shape(text: str) -> list[str]:
    stripped = text.strip()
    if stripped.startswith("{"):
        return [f"json keys {sorted(json.loads(stripped))}"]
    out: list[str] = []
    for line in text.strip("\n").splitlines():
        words = line.split()
        first = re.sub(r"\d+", "9", words[0]) if words else ""
        key = f"{len(line) - len(line.lstrip())}:{first}"
        if not out or out[-1] != key:
            out.append(key)
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo repository and a project naming it, its environment and its workspace."""
    root = tmp_path_factory.mktemp("docs")
    repo = create_reference_repository(root / "repo")
    study = root / "study"
    study.mkdir()
    (study / "pyproject.toml").write_text(
        '[project]\nname = "study"\nversion = "0"\n\n'
        '[tool.automl-setup]\nworkspace = "runs"\npython = ".venv-train"\n\n'
        f'[tool.automl-setup.engine]\nrepository = "{repo.url}"\n'
        f'subdirectory = "{repo.subdirectory}"\ndistribution = "{REFERENCE_DISTRIBUTION}"\n'
    )
    manifest = yaml.safe_load(EXAMPLE.read_text())
    manifest["search"]["budget"]["max_trials"] = 2  # the shape, not the length, is compared
    manifest["workload"]["argv"][-1] = "0"  # no sleep per trial
    (study / "m.yaml").write_text(yaml.safe_dump(manifest))
    return study


def test_every_console_example_runs_with_the_documented_shape(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AUTOML_SETUP_PROFILE", raising=False)  # the project file decides
    examples = console_examples()
    commands = [command.split()[1] for _page, command, _output in examples]
    assert {"resolve", "install", "verify", "diagnose", "history", "launch", "status"} <= set(
        commands
    )
    problems = []
    for page, command, documented in examples:
        result = run_cli(*shlex.split(command)[1:], cwd=project)
        if shape(result.stdout) != shape(documented):
            problems.append(
                f"{page}: $ {command} (exit {result.code})\n  documented: {shape(documented)}\n"
                f"  got:        {shape(result.stdout)}\n{result.output}"
            )
    assert problems == [], "\n".join(problems)
