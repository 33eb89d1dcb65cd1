#!/usr/bin/env python3
"""Check every action the workflows pin against the action's own repository, and against the
checked list .github/pins.json (docs/release.md, "The pinned actions and how to update them").

For each `uses: OWNER/NAME@COMMIT # vX.Y.Z` it asks the repository which commit the tag
vX.Y.Z names (for an annotated tag, the commit it points to, not the tag object) and whether
its action.yml declares every `with:` input the workflows give it. Then the checked list must
hold exactly those pins; with --record it is written from what was just checked instead.

    .venv/bin/python .github/check_pins.py                  # git fetch of each tag from GitHub
    .venv/bin/python .github/check_pins.py --record         # the same, then write .github/pins.json
    .venv/bin/python .github/check_pins.py --git-dir actions/checkout=/path/to/checkout.git ...
                                                         # a local clone or mirror of an action

Exit 0: every pin checked and listed; 1: a problem, each printed with its remedy.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

GITHUB = Path(__file__).resolve().parent
WORKFLOWS = GITHUB / "workflows"
PINS = GITHUB / "pins.json"

ACTION = r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*"
TAG = r"v\d+\.\d+\.\d+"
COMMIT = r"[0-9a-f]{40}"
USES_KEY = re.compile(r"^\s*(?:-\s+)?uses:")
# The one form a `uses:` line may take: the action, its full commit and the release as a comment.
PINNED = re.compile(
    rf"^\s*(?:-\s+)?uses:\s*(?P<action>{ACTION})@(?P<commit>{COMMIT})\s+#\s+(?P<tag>{TAG})\s*$"
)


class PinError(Exception):
    """A pin that is not in the one allowed form, or a list that cannot be read."""


class Pin(BaseModel):
    """One pinned action as it was checked against its own repository."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    action: str = Field(pattern=rf"^{ACTION}$", description="OWNER/NAME on GitHub")
    tag: str = Field(pattern=rf"^{TAG}$", description="the release the `# vX.Y.Z` comment names")
    commit: str = Field(pattern=rf"^{COMMIT}$", description="the commit that tag names")
    inputs: tuple[str, ...] = Field(
        description="the `with:` inputs the workflows give it, each declared by its action.yml"
    )
    checked: str = Field(min_length=1, description="how the commit and inputs were checked")
    checked_on: datetime.date


class PinList(BaseModel):
    """The checked list, .github/pins.json."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format_version: Literal[1]
    pins: tuple[Pin, ...]


Used = dict[tuple[str, str, str], frozenset[str]]  # (action, tag, commit) -> its `with:` inputs


def used_pins(workflows: Path = WORKFLOWS) -> Used:
    """Every pin of every workflow, with the inputs given to it; a `uses:` line in any other
    form than `OWNER/NAME@COMMIT # vX.Y.Z` raises PinError."""
    used: dict[tuple[str, str, str], set[str]] = {}
    for path in sorted(workflows.glob("*.y*ml")):
        text = path.read_text(encoding="utf-8")
        lines = [line for line in text.splitlines() if USES_KEY.match(line)]
        pins = [PINNED.match(line) for line in lines]
        for line, pin in zip(lines, pins, strict=True):
            if pin is None:
                raise PinError(
                    f"{path.name}: {line.strip()!r} is not "
                    "`uses: OWNER/NAME@<40-hex commit> # vX.Y.Z`"
                )
        steps = [
            step
            for job in yaml.safe_load(text)["jobs"].values()
            for step in job.get("steps", [])
            if "uses" in step
        ]
        if [step["uses"] for step in steps] != [f"{p['action']}@{p['commit']}" for p in pins]:
            raise PinError(f"{path.name}: a `uses:` is not on a line of its own")
        for pin, step in zip(pins, steps, strict=True):
            key = (pin["action"], pin["tag"], pin["commit"])
            used.setdefault(key, set()).update(step.get("with") or {})
    return {key: frozenset(inputs) for key, inputs in used.items()}


def load_list(path: Path = PINS) -> PinList:
    try:
        return PinList.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as error:
        raise PinError(f"{path}: not a readable checked list: {error}") from error


def compare(listed: PinList, used: Used) -> list[str]:
    """What differs between the workflows' pins and the checked list (empty: nothing)."""
    rows = {(pin.action, pin.tag, pin.commit): pin for pin in listed.pins}
    problems = []
    for key, inputs in sorted(used.items()):
        action, tag, commit = key
        row = rows.get(key)
        if row is None:
            problems.append(
                f"{action}@{commit} # {tag} is not in the checked list: check it against "
                "the action's repository (.github/check_pins.py --record)"
            )
        elif not inputs <= set(row.inputs):
            problems.append(
                f"{action} {tag}: the inputs {sorted(inputs - set(row.inputs))} were not "
                "checked against its action.yml (.github/check_pins.py --record)"
            )
    for key in sorted(set(rows) - set(used)):
        problems.append(f"{key[0]}@{key[2]} # {key[1]} is listed but no workflow uses it")
    return problems


def git(*args: str | Path) -> str:
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # never ask for a password
    result = subprocess.run(
        ["git", *map(str, args)], capture_output=True, text=True, env=environment, check=False
    )
    if result.returncode != 0:
        raise PinError(f"git {' '.join(map(str, args))} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def declared_inputs(git_dir: Path, commit: str) -> frozenset[str]:
    for name in ("action.yml", "action.yaml"):
        try:
            text = git("--git-dir", git_dir, "show", f"{commit}:{name}")
        except PinError:
            continue
        action: dict[str, Any] = yaml.safe_load(text)
        return frozenset(action.get("inputs") or {})
    raise PinError(f"{git_dir}: commit {commit} has no action.yml")


def resolve(action: str, tag: str, git_dir: Path | None) -> tuple[str, frozenset[str], str]:
    """The commit the tag names in the action's repository, the inputs its action.yml declares
    there, and how that was found. `action` and `tag` have matched PINNED: no option, no path."""
    with tempfile.TemporaryDirectory() as scratch:
        if git_dir is None:
            git_dir = Path(scratch) / "action.git"
            git("init", "--quiet", "--bare", git_dir)
            url = f"https://github.com/{action}.git"
            ref = f"refs/tags/{tag}"
            git(
                "--git-dir",
                git_dir,
                "fetch",
                "--quiet",
                "--depth=1",
                "--no-tags",
                url,
                f"{ref}:{ref}",
            )
            how = f"git fetch {url} {ref}, then git rev-parse {tag}^{{commit}} and its action.yml"
        else:
            how = (
                f"git rev-parse {tag}^{{commit}} and its action.yml "
                f"in a mirror of github.com/{action}"
            )
        try:
            commit = git(
                "--git-dir", git_dir, "rev-parse", "--verify", f"refs/tags/{tag}^{{commit}}"
            )
        except PinError as error:
            raise PinError(f"its repository has no tag {tag} ({error})") from error
        return commit, declared_inputs(git_dir, commit), how


def check(
    used: Used, git_dirs: dict[str, Path], today: datetime.date
) -> tuple[list[Pin], list[str]]:
    """Each pin checked against its repository: the rows to list, and the problems found."""
    rows, problems = [], []
    for (action, tag, commit), inputs in sorted(used.items()):
        try:
            found, declared, how = resolve(action, tag, git_dirs.get(action))
        except PinError as error:
            problems.append(f"{action} {tag}: cannot check it: {error}")
            continue
        if found != commit:
            problems.append(
                f"{action}: the workflows pin {commit} as {tag}, but {tag} names {found} in "
                f"{action}'s repository: pin {found}, or name the release {commit} is in"
            )
        elif not inputs <= declared:
            problems.append(
                f"{action} {tag}: its action.yml has no input {sorted(inputs - declared)}: "
                "drop it or pin a release that has it"
            )
        else:
            rows.append(
                Pin(
                    action=action,
                    tag=tag,
                    commit=commit,
                    inputs=tuple(sorted(inputs)),
                    checked=how,
                    checked_on=today,
                )
            )
    return rows, problems


def git_dir_option(text: str) -> tuple[str, Path]:
    action, separator, path = text.partition("=")
    if not separator or not re.fullmatch(ACTION, action):
        raise argparse.ArgumentTypeError(f"{text!r} is not OWNER/NAME=PATH")
    return action, Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--git-dir",
        type=git_dir_option,
        action="append",
        default=[],
        metavar="OWNER/NAME=PATH",
        help="read this action from a local clone or mirror",
    )
    parser.add_argument(
        "--record", action="store_true", help="write the checked list from this check"
    )
    parser.add_argument("--workflows", type=Path, default=WORKFLOWS, help=argparse.SUPPRESS)
    parser.add_argument("--pins", type=Path, default=PINS, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    try:
        used = used_pins(options.workflows)
        rows, problems = check(
            used, dict(options.git_dir), datetime.datetime.now(datetime.timezone.utc).date()
        )
        if not problems and not options.record:
            problems = compare(load_list(options.pins), used)
    except PinError as error:
        problems = [str(error)]
    for problem in problems:
        print(f"check_pins: {problem}", file=sys.stderr)
    if problems:
        return 1
    if options.record:
        text = PinList(format_version=1, pins=tuple(rows)).model_dump_json(indent=2)
        options.pins.write_text(text + "\n", encoding="utf-8")
    print(
        f"check_pins: {len(rows)} pins checked against their repositories"
        + (", recorded" if options.record else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
