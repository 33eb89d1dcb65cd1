"""The release artifacts, built as a release builds them (conftest.py's `release_dists`: a copy
of this checkout, a developer's litter planted in it, SOURCE_DATE_EPOCH at HEAD's commit time):
what an index checks of them, what the sdist holds, that it rebuilds the same wheel byte for
byte, that the version written once in pyproject.toml is the one they carry, and the changelog.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from email.policy import compat32
from pathlib import Path

from packaging.version import Version
from support.cli import REPO_ROOT
from support.release import (
    CHANGE_TYPES,
    DISTRIBUTION,
    LITTER,
    VERSIONED_MANIFESTS,
    ReleaseDists,
    build_dists,
    changelog_problems,
    copy_checkout,
    project_version,
    wheel_from_sdist,
)

# Never in an sdist: a venv, bytecode, the tools' caches, git's folder.
LITTER_PARTS = {".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".git"}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
        check=False,
    )  # fmt: skip


def _metadata(wheel: Path) -> tuple[str, dict[str, str], str]:
    """The wheel's dist-info folder, its METADATA headers and its body (the long description)."""
    with zipfile.ZipFile(wheel) as archive:
        (path,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = HeaderParser(policy=compat32).parsestr(archive.read(path).decode())
    return path.split("/")[0], dict(message.items()), str(message.get_payload())


def _version_file(wheel: Path) -> str:
    """The __version__ that mcp_server/_version.py of `wheel` defines."""
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read("mcp_server/_version.py").decode()
    namespace: dict[str, object] = {}
    exec(compile(source, "_version.py", "exec"), namespace)  # the build's own two lines
    return str(namespace["__version__"])


def _sdist_members(sdist: Path, version: str) -> set[str]:
    """The sdist's files, relative to its top folder (which must be the one all are under)."""
    top = f"automl_setup-{version}/"
    with tarfile.open(sdist) as archive:
        names = [m.name for m in archive.getmembers() if m.isfile()]
    assert all(n.startswith(top) for n in names), [n for n in names if not n.startswith(top)]
    return {n[len(top) :] for n in names}


# --- what an index checks --------------------------------------------------------------------


def test_twine_check_strict_passes_on_the_sdist_and_the_wheel(
    release_dists: ReleaseDists,
) -> None:
    """PyPI's own checks of the metadata, the README (the project's index page) rendering
    included, pass on both artifacts with warnings counted as failures."""
    proc = _run(
        sys.executable, "-m", "twine", "check", "--strict",
        str(release_dists.sdist), str(release_dists.wheel),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2, proc.stdout
    _, headers, body = _metadata(release_dists.wheel)
    assert headers["Description-Content-Type"] == "text/markdown"
    assert body.strip() == (REPO_ROOT / "README.md").read_text().strip()


def test_check_wheel_contents_finds_nothing(release_dists: ReleaseDists) -> None:
    """No duplicate, empty, misplaced or stray file in the wheel (check-wheel-contents' W and
    E codes)."""
    proc = _run(sys.executable, "-m", "check_wheel_contents", str(release_dists.wheel))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"{release_dists.wheel}: OK", proc.stdout


# --- what the sdist holds --------------------------------------------------------------------


def test_the_sdist_holds_what_the_wheel_is_built_from_and_no_litter(
    release_dists: ReleaseDists,
) -> None:
    """Every file of the package, the skills, the schemas, and the license, README and
    changelog are in the sdist; of the venv, bytecode and caches planted in the tree, nothing."""
    members = _sdist_members(release_dists.sdist, release_dists.version)
    tree = release_dists.tree
    planted = set(LITTER)
    package = {
        p.relative_to(tree).as_posix()
        for folder in ("mcp_server", "skills")
        for p in (tree / folder).rglob("*")
        if p.is_file() and p.relative_to(tree).as_posix() not in planted
    }
    assert package - members == set()
    schemas = {m for m in members if m.startswith("mcp_server/schemas/")}
    assert len(schemas) >= 10 and all(m.endswith(".schema.json") for m in schemas)
    assert {m.split("/")[1] for m in members if m.startswith("skills/")} == {
        p.name for p in (REPO_ROOT / "skills").iterdir() if p.is_dir()
    }
    for name in ("pyproject.toml", "LICENSE", "README.md", "CHANGELOG.md"):
        assert name in members, name
        packed = _tar_file(release_dists.sdist, release_dists.version, name)
        assert packed == (tree / name).read_bytes(), name
    assert "mcp_server/_version.py" in members
    assert planted & members == set()
    assert [m for m in members if LITTER_PARTS & set(m.split("/")) or m.endswith(".pyc")] == []


def _tar_file(sdist: Path, version: str, name: str) -> bytes:
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"automl_setup-{version}/{name}")
        assert member is not None
        return member.read()


def test_the_wheel_built_from_the_sdist_is_the_wheel_built_from_the_checkout(
    release_dists: ReleaseDists, tmp_path: Path
) -> None:
    """The sdist holds everything the wheel needs: built from it alone, at the same
    SOURCE_DATE_EPOCH, the wheel is byte for byte the one built from the checkout."""
    rebuilt = wheel_from_sdist(release_dists.sdist, tmp_path / "from-sdist", release_dists.epoch)
    assert rebuilt.name == release_dists.wheel.name
    assert _sha256(rebuilt) == _sha256(release_dists.wheel)


# --- the version ----------------------------------------------------------------------------


def test_the_wheel_carries_the_pyproject_version(release_dists: ReleaseDists) -> None:
    """METADATA's name and version are pyproject's, and so is the __version__ of the
    mcp_server/_version.py the build wrote (`--version`, the MCP serverInfo)."""
    version = project_version()
    dist_info, headers, _ = _metadata(release_dists.wheel)
    assert (headers["Name"], headers["Version"]) == (DISTRIBUTION, version)
    assert dist_info == f"automl_setup-{version}.dist-info"
    assert release_dists.wheel.name == f"automl_setup-{version}-py3-none-any.whl"
    assert _version_file(release_dists.wheel) == version
    with zipfile.ZipFile(release_dists.wheel) as archive:
        scripts = archive.read(f"{dist_info}/entry_points.txt").decode()
    assert "automl-setup = mcp_server.faces.cli.main:main" in scripts
    assert "automl-setup-mcp = mcp_server.faces.mcp.server:main" in scripts


def test_a_checkout_raised_to_the_next_version_builds_that_version(tmp_path: Path) -> None:
    """The version is written once: a copy of the checkout with pyproject's version (and the
    plugin manifests') raised builds a wheel and sdist of that version, _version.py included."""
    current = Version(project_version())
    raised = f"{current.major}.{current.minor}.{current.micro + 1}"
    tree = copy_checkout(tmp_path / "next", raised)
    for rel in VERSIONED_MANIFESTS:  # raised there, and nothing else of them changed
        before, after = (REPO_ROOT / rel).read_text(), (tree / rel).read_text()
        assert after == before.replace(f'"version": "{current}"', f'"version": "{raised}"'), rel
    sdist, wheel = build_dists(tree, tmp_path / "dist", 1_700_000_000)
    assert sdist.name == f"automl_setup-{raised}.tar.gz"
    assert _metadata(wheel)[1]["Version"] == raised
    assert _version_file(wheel) == raised
    assert (REPO_ROOT / "pyproject.toml").read_text() != (tree / "pyproject.toml").read_text()


# --- the changelog ----------------------------------------------------------------------------


def test_the_changelog_has_an_entry_for_the_version_and_keeps_the_format() -> None:
    """CHANGELOG.md is Keep a Changelog 1.1.0 (an Unreleased section first, releases newest
    first with ISO dates, link references) and has a dated entry for pyproject's version."""
    text = (REPO_ROOT / "CHANGELOG.md").read_text()
    assert changelog_problems(text, project_version()) == []


def test_the_changelog_check_fails_without_an_entry_or_with_a_bad_date() -> None:
    """The check above can fail: a version with no entry, a date that is not ISO, a release
    above Unreleased and an unknown change type are each named."""
    text = (REPO_ROOT / "CHANGELOG.md").read_text()
    version = project_version()
    assert changelog_problems(text, "99.0.0") == [
        "no '## [99.0.0] - YYYY-MM-DD' entry for version 99.0.0"
    ]
    heading = next(line for line in text.splitlines() if line.startswith(f"## [{version}] - "))
    day = heading.rsplit(" ", 1)[1]
    y, m, d = day.split("-")
    broken = text.replace(heading, heading.replace(day, f"{d}.{m}.{y}"))
    assert any("has no ISO date" in p for p in changelog_problems(broken, version))
    swapped = text.replace("## [Unreleased]", "## [Later]", 1)
    assert "the first section is not '## [Unreleased]'" in changelog_problems(swapped, version)
    assert f"### {CHANGE_TYPES[0]}" in text
    odd = text.replace(f"### {CHANGE_TYPES[0]}", "### New stuff", 1)
    assert any("'New stuff' is not one of" in p for p in changelog_problems(odd, version))
