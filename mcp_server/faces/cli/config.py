"""`automl-setup config show`: the settings a command run here would use, and where each comes
from. A command of the command line only: an MCP tool's reply already names its profile and
where it came from (`profile_source`), and the tools take explicit paths."""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp_server.faces.cli.commands import Outcome, Subparsers, add_command
from mcp_server.faces.cli.flags import FALLBACK, add_json, add_profile_flags
from mcp_server.faces.render.source import settings_text
from mcp_server.source.config import effective_settings


def cmd_config_show(args: argparse.Namespace) -> Outcome:
    settings = effective_settings(
        Path.cwd(),
        args.profile,
        args.python,
        args.workspace,
        repository=args.repository,
        subdirectory=args.subdirectory,
        distribution=args.distribution,
        requirement=args.requirement,
    )
    return Outcome(settings, settings_text(settings))


def add_commands(sub: Subparsers) -> None:
    p = add_command(
        sub, "config", "the effective settings and where each comes from",
        description="Show the settings a command run in this directory would use (the engine "
        "profile, target environment and workspace) and where each one comes from.",
        example="automl-setup config show",
    )  # fmt: skip
    actions = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = add_command(
        actions,
        "show",
        "print the engine profile, python and workspace a command here would use",
        example="automl-setup config show --json",
        description="Print the engine profile, target environment and workspace a command run "
        "in this directory would use, and the source of each: flags > --profile FILE > "
        "$AUTOML_SETUP_PROFILE > "
        "the project file (automl-setup.toml, or [tool.automl-setup] in pyproject.toml, "
        "searched from here upward) > the built-in default.",
    )
    show.add_argument(
        "--python",
        help=f"interpreter or venv directory (default: {FALLBACK['python']})",
    )
    show.add_argument("--workspace", help="directory of experiments")
    add_profile_flags(show)
    add_json(show)
    show.set_defaults(handler=cmd_config_show)
