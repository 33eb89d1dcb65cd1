"""`automl-setup skills COMMAND ...`: check, sync, manifest and link check from the shell."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from mcp_server.errors import ExitCode, SetupError
from mcp_server.skills.links import Problem, check_links, default_link_targets
from mcp_server.skills.reference import reference_problems
from mcp_server.skills.sync import CANONICAL_DIR, check_repository, manifest, sync
from mcp_server.skills.validate import check_paths, skill_dirs, skills_named


class _UsageError(Exception):
    pass


PATHS_HELP = {
    "check": "skill folders or files to check (default: every skill, and drift)",
    "links": "markdown files or folders to check (default: the repository's markdown)",
}
EXIT_CODES = "exit codes:\n  0  ok\n  1  problems found, or refused\n  2  usage error"
# (command, one-line help, the paragraph of its --help)
COMMANDS = (
    ("sync", "copy skills/ into .claude/skills/ and .agents/skills/",
     "Copy the canonical skills/ folder into both discovery paths, .claude/skills/ and "
     ".agents/skills/, so Claude Code and Codex find the same skills; files of ours no "
     "longer in skills/ are removed there."),
    ("check", "validate skills; with no PATH also detect drift",
     "Validate every skill with our strict rules and the Agent Skills reference validator "
     "(skills-ref); with no PATH, also report copies in the discovery paths that drifted "
     "from skills/."),
    ("manifest", "print sha256 and size of each skill file",
     "Print the sha256 and size of every file of every skill, one line each, for a review "
     "or a release note to pin."),
    ("links", "check relative links and anchors in markdown",
     "Check that every relative link and #anchor in the repository's markdown (or the "
     "PATHs) points at a file and heading that exist."),
)  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="automl-setup skills",
        description="Validate, sync and digest the agent skills of a repository.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--root",
        type=Path,
        default=None,
        help="repository root holding skills/ (default: the current directory)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text, description in COMMANDS:
        p = sub.add_parser(
            name, parents=[common], help=text, description=textwrap.fill(description, 78),
            epilog=f"example:\n  automl-setup skills {name}\n\n{EXIT_CODES}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )  # fmt: skip
        if name in PATHS_HELP:
            p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help=PATHS_HELP[name])
    return parser


def _root(args: argparse.Namespace, need_skills: bool) -> Path:
    root = (args.root or Path.cwd()).absolute()
    if not root.is_dir():
        raise _UsageError(f"--root {root}: not a folder")
    if need_skills and not (root / CANONICAL_DIR).is_dir():
        raise _UsageError(
            f"no {CANONICAL_DIR}/ folder in {root}; run from the repository root or pass --root"
        )
    return root


def _existing(paths: Sequence[Path]) -> list[Path]:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise _UsageError(f"no such file or folder: {', '.join(missing)}")
    return [p.absolute() for p in paths]


def _report(problems: list[Problem], root: Path, what: str) -> int:
    for problem in problems:
        print(problem.format(root))
    if problems:
        print(f"{what}: {len(problems)} problem(s)", file=sys.stderr)
        return ExitCode.REFUSED
    print(f"{what}: ok")
    return ExitCode.OK


def cli_main(argv: list[str]) -> int:
    """`automl-setup skills COMMAND ...`: 0 ok, 1 problems found or refused, 2 usage error."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed usage; keep its code (2, or 0 for --help)
        return int(exc.code or 0)
    try:
        if args.command == "sync":
            root = _root(args, need_skills=True)
            changes = sync(root)
            for change in changes:
                print(change)
            print("skills sync: " + ("updated" if changes else "already in sync"))
            return ExitCode.OK
        if args.command == "check":
            # Our rules, then the reference validator's findings beside them: either fails.
            if args.paths:
                root = _root(args, need_skills=False)
                paths = _existing(args.paths)
                theirs = reference_problems(skills_named(paths))
                return _report(check_paths(paths) + theirs, root, "skills check")
            root = _root(args, need_skills=True)
            theirs = reference_problems(skill_dirs(root / CANONICAL_DIR))
            return _report(check_repository(root) + theirs, root, "skills check")
        if args.command == "manifest":
            root = _root(args, need_skills=True)
            print(json.dumps(manifest(root / CANONICAL_DIR), indent=2))
            return ExitCode.OK
        root = _root(args, need_skills=False)
        targets = _existing(args.paths) if args.paths else default_link_targets(root)
        return _report(check_links(targets, confine=root), root, "link check")
    except _UsageError as exc:
        print(f"automl-setup skills: error: {exc}", file=sys.stderr)
        return ExitCode.INVALID_INPUT
    except SetupError as exc:
        print(exc.full_text(), file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(cli_main(sys.argv[1:]))
