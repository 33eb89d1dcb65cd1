#!/usr/bin/env python3
"""The release check (docs/release.md#versions): pyproject.toml's version and CHANGELOG.md say
the same thing about what a build is.

    python .ci/release_check.py                # CI, on every commit
    python .ci/release_check.py --tag vX.Y.Z   # the release workflow, before it builds

Refused (exit 1, each problem on a line of its own): a CHANGELOG.md that is not Keep a Changelog
1.1.0 (a released section without a date among them); a release version (no `.devN`) while
`[Unreleased]` lists changes, or without a dated section of its own; a development version
(`X.Y.Z.devN`) that is not above every released one; with `--tag`, a tag that is not `v` + the
project's version, or one naming a development version. Exit 0 prints what the version is.
It reads the two files and writes nothing. Standard library and `packaging` only (the release
workflow runs it before installing the project).
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from datetime import date
from pathlib import Path

from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CHANGE_TYPES = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
KEEP_A_CHANGELOG = "https://keepachangelog.com/en/1.1.0/"
_RELEASE_HEADING = re.compile(r"^## \[(?P<name>[^\]]+)\](?: - (?P<day>.+))?$")
_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
REFUSED = 1


def project_version(root: Path) -> str:
    """The version in `root`'s pyproject.toml: the one place it is written."""
    return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])


def _sections(lines: list[str]) -> tuple[list[tuple[int, str, str | None]], list[str]]:
    """The `## ` sections (line number, name, day) and the problems of the other headings."""
    sections: list[tuple[int, str, str | None]] = []
    problems: list[str] = []
    for number, line in enumerate(lines, 1):
        if line.startswith("## "):
            heading = _RELEASE_HEADING.match(line)
            if heading is None:
                problems.append(f"line {number}: not a release heading: {line!r}")
            else:
                sections.append((number, heading["name"], heading["day"]))
        elif line.startswith("### ") and line[4:] not in CHANGE_TYPES:
            problems.append(f"line {number}: {line[4:]!r} is not one of {', '.join(CHANGE_TYPES)}")
    return sections, problems


def released_versions(text: str) -> tuple[list[tuple[Version, date]], list[str]]:
    """The dated releases of a changelog, newest first as written, and the problems of its
    format: `# Changelog` first, `## [Unreleased]` the first section, then releases
    `## [X.Y.Z] - YYYY-MM-DD` newest first, change types from the six, a link reference for
    every section."""
    lines = text.splitlines()
    problems: list[str] = []
    if not lines or lines[0] != "# Changelog":
        problems.append("the first line is not '# Changelog'")
    if KEEP_A_CHANGELOG not in text:
        problems.append(f"it does not say it follows Keep a Changelog ({KEEP_A_CHANGELOG})")
    sections, heading_problems = _sections(lines)
    problems += heading_problems
    if not sections or sections[0][1:] != ("Unreleased", None):
        problems.append("the first section is not '## [Unreleased]'")
    releases: list[tuple[Version, date]] = []
    for number, name, day in sections[1:]:
        where = f"line {number}: [{name}]"
        try:
            released = Version(name)
        except InvalidVersion:
            problems.append(f"{where} is not a version")
            continue
        if day is None:
            problems.append(
                f"{where} has no date: a released section is '## [{name}] - YYYY-MM-DD' "
                "(the day it was released)"
            )
        elif not _ISO_DAY.match(day):
            problems.append(f"{where} has no ISO date (YYYY-MM-DD): {day!r}")
        else:
            try:
                releases.append((released, date.fromisoformat(day)))
            except ValueError:
                problems.append(f"{where} has no such day: {day}")
    for (newer, newer_day), (older, older_day) in itertools.pairwise(releases):
        if not (newer > older and newer_day >= older_day):
            problems.append(
                f"[{newer}] {newer_day} is not newer than the [{older}] {older_day} below it"
            )
    for _number, name, _day in sections:
        if not re.search(rf"^\[{re.escape(name)}\]: \S+$", text, flags=re.M | re.I):
            problems.append(
                f"no link reference for [{name}] (`[{name.lower()}]: URL` at the bottom)"
            )
    return releases, problems


def unreleased_changes(text: str) -> list[str]:
    """The lines under `## [Unreleased]` other than blank ones and `###` change-type headings."""
    changes: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line == "## [Unreleased]"
        elif inside and line.strip() and not line.startswith("### "):
            changes.append(line)
    return changes


def version_problems(text: str, version: str) -> list[str]:
    """What keeps `version` (pyproject's) from saying what a build of this changelog is."""
    releases, problems = released_versions(text)
    try:
        parsed = Version(version)
    except InvalidVersion:
        return [*problems, f"pyproject.toml's version {version!r} is not a PEP 440 version"]
    released = {v for v, _ in releases}
    if parsed.is_devrelease:
        newest = max(released, default=None)
        if newest is not None and parsed <= newest:
            problems.append(
                f"development version {version} is not above the newest release {newest}: "
                f"between releases the version is the next one with .devN (e.g. "
                f"{newest.major}.{newest.minor + 1}.0.dev0)"
            )
        return problems
    changes = unreleased_changes(text)
    if changes:
        problems.append(
            f"version {version} is a release, but [Unreleased] lists {len(changes)} line(s) of "
            f"changes: a build of this tree is not {version}; move them under "
            f"'## [{version}] - YYYY-MM-DD' to release it, or set the version to the next one "
            f"with .dev0 (e.g. {parsed.major}.{parsed.minor + 1}.0.dev0)"
        )
    if parsed not in released:
        problems.append(f"no '## [{version}] - YYYY-MM-DD' entry for version {version}")
    return problems


def tag_problems(tag: str, version: str) -> list[str]:
    """What keeps `tag` from being the release tag of `version`."""
    problems: list[str] = []
    if tag != f"v{version}":
        problems.append(
            f"tag {tag!r} does not name this project's version: pyproject.toml says {version} "
            f"(its tag is v{version}); raise the version as docs/release.md says, or tag the "
            "commit that has it"
        )
    try:
        if Version(version).is_devrelease:
            problems.append(
                f"version {version} is a development version: a release tag names a release "
                "(docs/release.md#cutting-a-release)"
            )
    except InvalidVersion:
        pass  # named by version_problems
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", help="the release tag being pushed (vX.Y.Z)")
    parser.add_argument(
        "--root", type=Path, default=Path(__file__).resolve().parents[1],
        help="the project folder (default: this checkout)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    version = project_version(args.root)
    problems = version_problems((args.root / "CHANGELOG.md").read_text(), version)
    if args.tag is not None:
        problems += tag_problems(args.tag, version)
    if problems:
        print(f"release check: refused for version {version}:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return REFUSED
    kind = "a development version" if Version(version).is_devrelease else "a release"
    print(f"release check: {version} is {kind}; CHANGELOG.md agrees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
