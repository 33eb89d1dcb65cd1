"""A command line people like: every subcommand's --help has a paragraph,
an example and the exit codes, every flag has help; a closed pipe ends quietly with 141;
shell completion is generated from the parser."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import closed_pipe_run
from support.refengine import engine_env, example_manifest

from mcp_server.errors import ExitCode
from mcp_server.faces.cli.main import build_parser
from mcp_server.faces.registry import PIPE_CLOSED
from mcp_server.skills.cli import skills_parser
from mcp_server.source.profile import DEFAULT_DISTRIBUTION, DEFAULT_REPOSITORY


def subcommands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every subcommand, nested ones too ("slurm watch register"), by its full name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if child.prog.endswith(name):  # an alias (`experiments`) shares its parser
                    yield f"{prefix}{name}", child
                    yield from subcommands(child, f"{prefix}{name} ")


def all_subcommands() -> list[tuple[str, argparse.ArgumentParser]]:
    found = list(subcommands(build_parser(), "automl-setup "))
    # `automl-setup skills ...` is handed to its own parser before the main one parses.
    found += [(name, p) for name, p in subcommands(skills_parser(), "automl-setup skills ")]
    return found


def test_every_subcommand_has_a_paragraph_an_example_and_exit_codes() -> None:
    problems = []
    commands = all_subcommands()
    assert len(commands) > 25  # the walk reaches nested commands too
    for name, parser in commands:
        text = parser.format_help()
        if not parser.description or len(parser.description.split()) < 8:
            problems.append(f"{name}: no paragraph of description")
        if f"example:\n  {name}" not in text:
            problems.append(f"{name}: no example starting with `{name}`")
        if "exit codes:\n  0 " not in text:
            problems.append(f"{name}: no exit codes")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                problems.append(f"{name}: {'/'.join(action.option_strings) or action.dest}")
    assert problems == []


def test_exit_codes_print_as_numbers_on_every_python() -> None:
    """Python 3.10's str() of an IntEnum member is its name ("ExitCode.OK"), 3.11's the number:
    every help text lists its codes with `!s`, so ExitCode says the number on every version."""
    for code in ExitCode:
        assert str(code) == f"{code!s}" == f"{code}" == str(code.value)
    (verify,) = (p for name, p in all_subcommands() if name == "automl-setup verify")
    assert "exit codes:\n  0    ok\n  1    refused" in verify.format_help()


def test_install_help_names_the_default_engine() -> None:
    (install,) = (p for name, p in all_subcommands() if name == "automl-setup install")
    text = "".join(install.format_help().split())  # argparse may wrap inside the URL
    assert DEFAULT_DISTRIBUTION in text and DEFAULT_REPOSITORY in text


@pytest.mark.parametrize(
    "args",
    [
        ["completion", "bash"],  # a long output (argparse itself drops --help's quietly)
        ["config", "show", "--json"],  # one JSON document
    ],
)
def test_a_closed_pipe_ends_quietly_with_141(args: list[str]) -> None:
    assert closed_pipe_run(sys.executable, "-m", "mcp_server.faces.cli", *args) == (
        PIPE_CLOSED,
        "",
    )


def test_the_reference_engine_ends_quietly_on_a_closed_pipe(tmp_path: Path) -> None:
    manifest, workspace = example_manifest(tmp_path), tmp_path / "w"
    run = (sys.executable, "-m", "automl_refengine", "plan", "--manifest", str(manifest),
           "--workspace", str(workspace))  # fmt: skip
    assert closed_pipe_run(*run, env=engine_env()) == (PIPE_CLOSED, "")


def test_completion_scripts_are_generated_from_the_parser(tmp_path: Path) -> None:
    from mcp_server.faces.cli.main import main

    script = tmp_path / "automl-setup.bash"
    for shell in ("bash", "zsh"):
        result = subprocess.run(
            [sys.executable, "-m", "mcp_server.faces.cli", "completion", shell],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        text = result.stdout
        for command in ("install", "resolve", "launch", "status", "completion"):
            assert command in text, (shell, command)
        assert "--expect-commit" in text
        if shell == "bash":
            script.write_text(text)
            subprocess.run(["bash", "-n", str(script)], check=True)
    with pytest.raises(SystemExit) as refused:  # argparse's own refusal of another shell
        main(["completion", "fish"])
    assert refused.value.code == 2
