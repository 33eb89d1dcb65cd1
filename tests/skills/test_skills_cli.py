"""The `skills` command line, and the skills committed in this repository."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_server.faces.registry import ROWS
from mcp_server.skills.cli import cli_main
from mcp_server.skills.sync import check_repository, manifest
from mcp_server.skills.validate import skill_dirs

REPO = Path(__file__).resolve().parents[2]


# The one table of operations: each MCP tool and the command that does the same thing.
TOOL_TO_COMMAND = {op.tool: f"automl-setup {op.command}" for op in ROWS}
REQUIRED_TOOLS = {
    "automl-setup": {
        "list_branches",
        "resolve_branch",
        "install_engine",
        "verify_engine",
        "history_engine",
    },
    "automl-experiments": {
        "launch_experiment",
        "resume_experiment",
        "status_experiment",
        "list_experiments",
        "verify_engine",
    },
    "automl-troubleshoot": {"diagnose_engine", "verify_engine", "install_engine"},
    "automl-slurm": {"submit_slurm_job", "status_slurm_job", "cancel_slurm_job"},
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "skills", tmp_path / "skills")
    return tmp_path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli_main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --- the command line ---------------------------------------------------------------------


def test_check_sync_check(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No copies and none named: nothing to compare, no drift (tests/skills/test_skills_ci.py).
    assert _run(["check", "--root", str(repo)], capsys)[0] == 0
    mirrors = ["--mirror", ".claude/skills", "--mirror", ".agents/skills"]
    code, out, _ = _run(["check", "--root", str(repo), *mirrors], capsys)
    assert code == 1
    assert ".claude/skills:1: drift-missing: missing (run: automl-setup skills sync)" in out

    code, out, _ = _run(["sync", "--root", str(repo)], capsys)
    assert code == 0
    assert "wrote .agents/skills/automl-setup/SKILL.md" in out

    code, out, _ = _run(["check", "--root", str(repo), *mirrors], capsys)
    assert code == 0 and out.startswith("skills check: ok; 4 skills, ")


def test_check_prints_path_line_rule_message(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skill_md = repo / "skills" / "automl-setup" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("license: Apache-2.0", "model: haiku"))
    code, out, _ = _run(["check", "--root", str(repo), str(skill_md)], capsys)
    assert code == 1
    # Ours; the reference validator's report of the same field is not repeated.
    assert out.splitlines()[:-1] == [
        "skills/automl-setup/SKILL.md:4: schema: field 'model' is not allowed; allowed fields: "
        "name, description, license, compatibility, metadata, allowed-tools",
    ]
    assert out.splitlines()[-1].endswith("1 errors, 0 warnings")


def test_sync_refusal_exits_1_and_lists_the_problems(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "skills" / "stray.txt").write_text("x\n")
    code, _, err = _run(["sync", "--root", str(repo)], capsys)
    assert code == 1
    assert "skills/stray.txt:1: layout: only skill folders belong here" in err
    assert not (repo / ".claude").exists()


def test_manifest_prints_json(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["manifest", "--root", str(repo)], capsys)
    assert code == 0
    assert json.loads(out) == manifest(repo / "skills")


def test_links_checks_readme_docs_and_skills(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "README.md").write_text("# Readme\n\nSee [setup](docs/setup.md#install).\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "setup.md").write_text("# Setup\n\n## Install\n")
    assert _run(["links", "--root", str(repo)], capsys)[0] == 0

    (repo / "docs" / "setup.md").write_text("# Setup\n")
    code, out, _ = _run(["links", "--root", str(repo)], capsys)
    assert code == 1
    finding, counts = out.splitlines()
    assert finding == (
        "README.md:3: link-anchor: docs/setup.md#install: no heading with anchor #install"
    )
    assert re.fullmatch(
        r"link check: failed; 0 skills, \d+ files, \d+ links and \d+ anchors checked; "
        r"1 errors, 0 warnings",
        counts,
    ), counts


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["check", "--no-such-flag"],
        ["check", "--root", "/no/such/folder"],
        ["check", "/no/such/skill"],
        ["links", "/no/such/doc.md"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(argv, capsys)[0] == 2


def test_commands_needing_skills_exit_2_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("sync", "check", "manifest"):
        code, _, err = _run([command, "--root", str(tmp_path)], capsys)
        assert code == 2
        assert "no skills/ folder" in err


def test_python_dash_m_runs_the_command_line(repo: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mcp_server.skills.cli", "check", str(repo / "skills")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("skills check: ok; 4 skills, ")


# --- the committed skills -----------------------------------------------------------------


def test_committed_skills_and_their_copies_pass() -> None:
    problems = check_repository(REPO)
    assert [p.format(REPO) for p in problems] == []


def test_committed_skills_are_the_expected_ones() -> None:
    assert [p.name for p in skill_dirs(REPO / "skills")] == sorted(REQUIRED_TOOLS)


@pytest.mark.parametrize("name", sorted(REQUIRED_TOOLS))
def test_each_skill_names_the_mcp_tool_and_the_command_for_every_step(name: str) -> None:
    folder = REPO / "skills" / name
    text = "\n".join(p.read_text() for p in sorted(folder.rglob("*.md")))
    tools = {tool for tool in TOOL_TO_COMMAND if re.search(rf"`{tool}`", text)}
    assert REQUIRED_TOOLS[name] <= tools
    for tool in tools:
        assert TOOL_TO_COMMAND[tool] in text, f"{name} names {tool} but not its command"
    for tool, command in TOOL_TO_COMMAND.items():
        if re.search(rf"`{re.escape(command)}\b", text):
            assert tool in tools, f"{name} names {command} but not the MCP tool {tool}"


def test_setup_skill_asks_for_the_branch_and_states_the_transition_rules() -> None:
    text = (REPO / "skills" / "automl-setup" / "SKILL.md").read_text()
    assert "Never choose for the user" in text
    assert "`main`, or from a development branch" in text
    for rule in ("separate environment", "live controller", "relabel wheels", "--no-sync"):
        assert rule in text
    reference = (REPO / "skills" / "automl-setup" / "references" / "transitions.md").read_text()
    assert "uv sync" in reference and "uv run --no-sync" in reference


def test_troubleshoot_skill_tells_the_two_distributions_apart() -> None:
    text = (REPO / "skills" / "automl-troubleshoot" / "SKILL.md").read_text()
    for needle in ("nvidia-tao-automl", "tao_automl", "nvidia-automl-core", "automl_core"):
        assert needle in text
