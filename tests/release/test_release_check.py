"""The release check (.ci/release_check.py), run as CI and the release workflow run it, on a
folder holding a copy of this checkout's pyproject.toml and CHANGELOG.md: what it accepts, and
each refusal with its message and exit code, the two files left byte for byte as they were."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version
from support.cli import REPO_ROOT
from support.release import RELEASE_CHECK, cut_release, project_version, release_check

REFUSED = 1
USAGE = 2


def _project(root: Path, version: str | None = None, changelog: str | None = None) -> Path:
    """`root` with this checkout's pyproject.toml (its version replaced if given) and
    CHANGELOG.md (or `changelog`)."""
    root.mkdir(parents=True, exist_ok=True)
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    if version is not None:
        pyproject = re.sub(r'^version = "[^"]*"$', f'version = "{version}"', pyproject, flags=re.M)
    (root / "pyproject.toml").write_text(pyproject)
    text = (REPO_ROOT / "CHANGELOG.md").read_text() if changelog is None else changelog
    (root / "CHANGELOG.md").write_text(text)
    return root


def _check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The check as a script, in a fresh interpreter; the files it read must be unchanged."""
    before = {p.name: p.read_bytes() for p in root.iterdir()}
    proc = subprocess.run(
        [sys.executable, str(RELEASE_CHECK), "--root", str(root), *args],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False,
    )  # fmt: skip
    assert {p.name: p.read_bytes() for p in root.iterdir()} == before
    return proc


def _released(version: str) -> str:
    """This checkout's changelog with its [Unreleased] notes released as `version`."""
    return cut_release((REPO_ROOT / "CHANGELOG.md").read_text(), version, "2026-12-05")


def _next_release() -> str:
    return Version(project_version()).base_version


def test_this_checkout_passes_as_a_development_version(tmp_path: Path) -> None:
    proc = _check(_project(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        f"release check: {project_version()} is a development version; CHANGELOG.md agrees\n"
    )
    # The checkout itself too, as .ci/run runs it (its default root).
    own = subprocess.run(
        [sys.executable, str(RELEASE_CHECK)], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert own.returncode == 0, own.stderr


def test_a_cut_release_passes_with_its_tag(tmp_path: Path) -> None:
    """Version X.Y.Z, its notes under a dated `## [X.Y.Z]`, [Unreleased] empty, tag vX.Y.Z."""
    version = _next_release()
    root = _project(tmp_path, version, _released(version))
    proc = _check(root, "--tag", f"v{version}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"release check: {version} is a release; CHANGELOG.md agrees\n"


def test_a_tag_that_is_not_the_project_version_is_refused(tmp_path: Path) -> None:
    version = _next_release()
    root = _project(tmp_path, version, _released(version))
    proc = _check(root, "--tag", "v9.9.9")
    assert proc.returncode == REFUSED
    assert proc.stdout == ""
    assert proc.stderr == (
        f"release check: refused for version {version}:\n"
        f"  tag 'v9.9.9' does not name this project's version: pyproject.toml says {version} "
        f"(its tag is v{version}); raise the version as docs/release.md says, or tag the "
        "commit that has it\n"
    )


def test_a_tag_of_a_development_version_is_refused(tmp_path: Path) -> None:
    """Even a tag equal to `v` + the version: a .devN is never released."""
    version = project_version()
    proc = _check(_project(tmp_path), "--tag", f"v{version}")
    assert proc.returncode == REFUSED
    assert (
        f"  version {version} is a development version: a release tag names a release "
        "(docs/release.md#cutting-a-release)\n"
    ) in proc.stderr


def test_a_released_version_with_unreleased_changes_is_refused(tmp_path: Path) -> None:
    """pyproject says X.Y.Z while [Unreleased] still lists changes: a build of that tree is
    not X.Y.Z. Refused untagged (CI) and tagged (the release)."""
    version = _next_release()
    changelog = _released(version).replace(
        "## [Unreleased]\n", "## [Unreleased]\n\n### Fixed\n\n- A fix after the release.\n", 1
    )
    root = _project(tmp_path, version, changelog)
    for args in ((), ("--tag", f"v{version}")):
        proc = _check(root, *args)
        assert proc.returncode == REFUSED, args
        assert proc.stderr == (
            f"release check: refused for version {version}:\n"
            f"  version {version} is a release, but [Unreleased] lists 1 line(s) of changes: "
            f"a build of this tree is not {version}; move them under "
            f"'## [{version}] - YYYY-MM-DD' to release it, or set the version to the next one "
            f"with .dev0 (e.g. {Version(version).major}.{Version(version).minor + 1}.0.dev0)\n"
        ), args


def test_a_changelog_section_without_a_date_is_refused(tmp_path: Path) -> None:
    version = _next_release()
    undated = _released(version).replace(f"## [{version}] - 2026-12-05", f"## [{version}]")
    proc = _check(_project(tmp_path, version, undated), "--tag", f"v{version}")
    assert proc.returncode == REFUSED
    line = undated.splitlines().index(f"## [{version}]") + 1
    assert proc.stderr == (
        f"release check: refused for version {version}:\n"
        f"  line {line}: [{version}] has no date: a released section is "
        f"'## [{version}] - YYYY-MM-DD' (the day it was released)\n"
        f"  no '## [{version}] - YYYY-MM-DD' entry for version {version}\n"
    )


def test_a_development_version_below_a_release_is_refused(tmp_path: Path) -> None:
    """0.1.0.dev3 after 0.1.0 was released sorts below it: the next one is meant."""
    newest = max(v for v, _ in release_check.released_versions(
        (REPO_ROOT / "CHANGELOG.md").read_text())[0])  # fmt: skip
    stale = f"{newest}.dev3"
    proc = _check(_project(tmp_path, stale))
    assert proc.returncode == REFUSED
    assert f"  development version {stale} is not above the newest release {newest}" in (
        proc.stderr
    )


@pytest.mark.parametrize("args", [("--tag",), ("--no-such-flag",)])
def test_a_malformed_call_is_a_usage_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = _check(_project(tmp_path), *args)
    assert proc.returncode == USAGE
    assert "usage: release_check.py" in proc.stderr
