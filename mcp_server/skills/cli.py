"""`automl-setup skills COMMAND ...`: check, sync, manifest and link check from the shell."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from mcp_server.errors import ExitCode, SetupError
from mcp_server.skills.links import Problem, Tally, check_links, default_link_targets
from mcp_server.skills.reference import reference_problems, skipped_note
from mcp_server.skills.report import FORMATS, Format, build_report, render
from mcp_server.skills.settings import LayoutError, read_layout
from mcp_server.skills.sync import CANONICAL_DIR, check_repository, manifest, sync
from mcp_server.skills.validate import check_paths, skill_dirs, skills_named


class _UsageError(Exception):
    pass


PATHS_HELP = {
    "check": "skill folders, folders of skills, or files of skills to check (a file outside "
    "every skill is passed over; default: every skill of --skills-dir, and the mirrors)",
    "links": "markdown files or folders to check (default: README.md, docs/, skills/)",
}
EXIT_CODES = (
    "exit codes:\n  0  ok (warnings only, without --strict)\n  1  errors found (or warnings, "
    "with --strict), or refused\n  2  usage error"
)
# Where skills-ref cannot be installed (reference.py): our rules alone, and a note.
SKIPPED_NOTE = (
    "\n\non Python 3.10 the reference validator (skills-ref needs 3.11) cannot run: it is\n"
    "skipped with a note on stderr, and the exit code is that of our rules alone"
)
# (command, one-line help, the paragraph of its --help)
COMMANDS = (
    ("sync", "copy skills/ into .claude/skills/ and .agents/skills/",
     "Copy the canonical skills/ folder into both discovery paths, .claude/skills/ and "
     ".agents/skills/, so Claude Code and Codex find the same skills: each mirror is made an "
     "exact copy, so anything in it that skills/ does not hold (a file, a folder, a symlink) "
     "is removed."),
    ("check", "validate skills; with no PATH also detect drift",
     "Validate every skill with our strict rules and the Agent Skills reference validator "
     "(skills-ref), each finding graded: an error for what the specification requires, a "
     "warning for what it recommends. With no PATH, also report copies in the mirrors that "
     "drifted from the skills folder (the mirrors named by --mirror or the repository's "
     "[tool.automl-setup.skills] settings, else the discovery folders that exist)."),
    ("manifest", "print sha256 and size of each skill file",
     "Print one JSON document: the skills, the path, sha256 and size of every file of "
     "every skill, and one sha256 over them all (bundle_sha256), for a review or a release "
     "note to pin."),
    ("links", "check relative links and anchors in markdown",
     "Check that every relative link and #anchor in the repository's markdown (or the "
     "PATHs) points at a file and heading that exist; the last line counts what was checked."),
)  # fmt: skip


def skills_parser() -> argparse.ArgumentParser:
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
            epilog=f"example:\n  automl-setup skills {name}\n\n{EXIT_CODES}"
            + (SKIPPED_NOTE if name == "check" else ""),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )  # fmt: skip
        if name in PATHS_HELP:
            p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help=PATHS_HELP[name])
            p.add_argument(
                "--format", choices=FORMATS, default="text",
                help="text (default), json (one document), github (workflow annotations)",
            )  # fmt: skip
            p.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")
        if name == "check":
            p.add_argument("--skills-dir", help="the canonical skills folder (default: skills)")
            p.add_argument(
                "--mirror", action="append", metavar="PATH",
                help="a folder that must be an exact copy of the skills folder (repeatable)",
            )  # fmt: skip
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


def _report(args: argparse.Namespace, root: Path, problems: list[Problem], tally: Tally) -> int:
    fmt: Format = args.format
    report = build_report(args.command, root, problems, tally, args.strict)
    print(render(report, fmt))
    return ExitCode.OK if report.ok else ExitCode.REFUSED


def _check(args: argparse.Namespace, tally: Tally) -> tuple[Path, list[Problem]]:
    """Our rules, then the reference validator's findings beside them: either fails."""
    if args.paths:
        root = _root(args, need_skills=False)
        paths = _existing(args.paths)
        theirs = reference_problems(skills_named(paths))
        return root, check_paths(paths, tally) + theirs
    root = _root(args, need_skills=False)
    try:
        layout = read_layout(root, args.skills_dir, args.mirror)
    except LayoutError as exc:
        raise _UsageError(str(exc)) from None
    if not (root / layout.skills_dir).is_dir():
        raise _UsageError(f"no {layout.skills_dir}/ folder in {root}; pass --root or --skills-dir")
    theirs = reference_problems(skill_dirs(root / layout.skills_dir))
    mine = check_repository(root, layout.skills_dir, layout.mirrors, tally)
    return root, mine + theirs


def cli_main(argv: list[str]) -> int:
    """`automl-setup skills COMMAND ...`: 0 ok, 1 problems found or refused, 2 usage error."""
    try:
        args = skills_parser().parse_args(argv)
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
            tally = Tally()
            root, problems = _check(args, tally)
            note = skipped_note()
            if note is not None:  # never silently a half check
                print(f"note: {note}", file=sys.stderr)
            return _report(args, root, problems, tally)
        if args.command == "manifest":
            root = _root(args, need_skills=True)
            print(json.dumps(manifest(root / CANONICAL_DIR), indent=2))
            return ExitCode.OK
        root = _root(args, need_skills=False)
        targets = _existing(args.paths) if args.paths else default_link_targets(root)
        tally = Tally()
        return _report(args, root, check_links(targets, confine=root, tally=tally), tally)
    except _UsageError as exc:
        print(f"automl-setup skills: error: {exc}", file=sys.stderr)
        return ExitCode.INVALID_INPUT
    except SetupError as exc:
        print(exc.full_text(), file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(cli_main(sys.argv[1:]))
