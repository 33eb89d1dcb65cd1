"""`automl-setup init`: the bundled skills and the MCP server written into a user's project
(bundle/init.py). A command of the command line only: an agent does not configure itself."""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp_server.bundle.ownership import AGENTS
from mcp_server.faces.cli.commands import Outcome, Subparsers, add_command
from mcp_server.faces.cli.flags import add_json

ENGINE_FIELDS = ("repository", "subdirectory", "distribution", "requirement")


def cmd_init(args: argparse.Namespace) -> Outcome:
    # Imported here: the merges (tomlkit) are for this command only, not every command's start.
    from mcp_server.bundle.init import InitRequest, exit_code, project_dir, run_init
    from mcp_server.bundle.targets import check_server_command, refuse_launcher_and_command
    from mcp_server.bundle.uvindex import check_index
    from mcp_server.faces.render.init import init_text

    engine = {f: getattr(args, f) for f in ENGINE_FIELDS if getattr(args, f) is not None}
    if engine and "repository" not in engine:
        engine = {"repository": "", **engine}  # refused by the URL check, naming the flag
    request = InitRequest(
        project=project_dir(args.project or Path.cwd()),
        agents=tuple(dict.fromkeys(args.agent)) if args.agent else AGENTS,
        check=args.check,
        mcp_command=None if args.mcp_command is None else check_server_command(args.mcp_command),
        engine=engine or None,
        launcher=refuse_launcher_and_command(args.launcher, args.mcp_command),
        index=None if args.index is None else check_index(args.index, "--index"),
    )
    result = run_init(request)
    return Outcome(result, init_text(result), exit_code(result))


def add_commands(sub: Subparsers) -> None:
    p = add_command(
        sub, "init", "write the skills and the MCP server into a project (Claude Code, Codex)",
        description="Write every bundled skill into the project's .claude/skills/ (Claude "
        "Code) and .agents/skills/ (Codex), and register this installation's MCP server in "
        ".mcp.json and .codex/config.toml, merged into files that exist (every other server, "
        "key and comment kept). What it wrote is recorded with its sha256 in "
        ".automl-setup/init.json: a second run changes nothing, an upgrade replaces only what "
        "init wrote and nobody changed, and a file someone changed is never overwritten (the "
        "run is refused with the difference, writing nothing). --check writes nothing and exits "
        "1 naming each stale, edited or missing file.",
        example="automl-setup init\nautoml-setup init --project ~/my-training-repo --agent codex"
        "\nautoml-setup init --launcher uvx --index https://pypi.example.com/simple/"
        "\nautoml-setup init --check",
    )  # fmt: skip
    p.add_argument("--project", type=Path, help="the project folder (default: here)")
    p.add_argument(
        "--agent", action="append", choices=AGENTS, help="a client to set up (repeatable; "
        "default: both)",
    )  # fmt: skip
    p.add_argument("--check", action="store_true", help="judge only: 0 current, 1 not")
    p.add_argument(
        "--launcher", choices=("path", "uvx"), default=None,
        help="how the clients start the server: path, this installation's automl-setup-mcp "
        "by absolute path (default); uvx, `uvx --from automl-setup==<this version> "
        "automl-setup-mcp`, the same on every machine (a team commits it)",
    )  # fmt: skip
    p.add_argument(
        "--index", metavar="URL",
        help="with --launcher uvx: the package index uvx installs automl-setup from, written "
        "into the entry (`uvx --index automl-setup=URL`) so a teammate needs no uv setting; "
        "never a login in the URL: uv takes it from UV_INDEX_AUTOML_SETUP_USERNAME and "
        "_PASSWORD, the keyring or ~/.netrc (default: the project file's index)",
    )  # fmt: skip
    group = p.add_argument_group(
        "engine (optional): the project file's engine table, [tool.automl-setup.engine] of "
        "pyproject.toml or [engine] of automl-setup.toml"
    )
    group.add_argument("--repository", help="git URL of the engine (no credentials)")
    group.add_argument("--subdirectory", help="path of the engine package in the repository")
    group.add_argument("--distribution", help="distribution name the wheel must have")
    group.add_argument("--requirement", help="version specifier the wheel must satisfy")
    add_json(p)
    p.add_argument(
        "--mcp-command", nargs=argparse.REMAINDER, metavar="CMD",
        help="the server's command and arguments instead of this installation's "
        "automl-setup-mcp (last: everything after it is the command)",
    )  # fmt: skip
    p.set_defaults(handler=cmd_init)
