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
    DISTRIBUTION,
    LITTER,
    VERSIONED_MANIFESTS,
    ReleaseDists,
    build_dists,
    commit_tree,
    copy_checkout,
    cut_release,
    project_version,
    release_check,
    run_checked,
    wheel_from_sdist,
)

from mcp_server.source.profile import tomllib
from mcp_server.source.wheelbuild import uv_binary

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


def test_the_sdist_takes_only_the_top_level_entries_it_names(
    release_dists: ReleaseDists,
) -> None:
    """pyproject's sdist include patterns are anchored (`/docs`, not `docs`): the sdist holds
    the entries they name at the top and nothing else, never a same-named file or folder deeper
    down (the skills mirrors, bench/README.md), which an unanchored pattern also takes."""
    pyproject = tomllib.loads((release_dists.tree / "pyproject.toml").read_text())
    include = pyproject["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    assert [p for p in include if not p.startswith("/")] == []
    # Hatch adds the metadata and pyproject.toml to every sdist, and .gitignore in a git tree.
    named = {p.lstrip("/") for p in include} | {"PKG-INFO", "pyproject.toml", ".gitignore"}
    members = _sdist_members(release_dists.sdist, release_dists.version)
    assert sorted(m for m in members if m.split("/")[0] not in named) == []
    deeper = [".claude/skills/automl-setup/SKILL.md", "bench/README.md"]
    assert all((release_dists.tree / rel).is_file() for rel in deeper)
    assert set(deeper) & members == set()


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


def _build_names(wheel: Path) -> tuple[str, str | None, str]:
    """(__version__, __commit__, __build__) of the mcp_server/_version.py in `wheel`."""
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read("mcp_server/_version.py").decode()
    namespace: dict[str, object] = {}
    exec(compile(source, "_version.py", "exec"), namespace)  # the build's own lines
    commit = namespace["__commit__"]
    assert commit is None or isinstance(commit, str)
    return str(namespace["__version__"]), commit, str(namespace["__build__"])


def test_a_build_names_the_commit_it_was_made_from_and_the_sdist_keeps_it(
    release_dists: ReleaseDists, tmp_path: Path
) -> None:
    """Built from a git checkout (conftest.py commits the copy), the wheel names the version
    and the commit (`+g<commit>`, PEP 440's local label) for `--version`, serverInfo and the
    records; the sdist carries the same, and the wheel built from it (no git there) too."""
    version = release_dists.version
    commit = release_dists.build.removeprefix(f"{version}+g")
    assert len(commit) == 40 and Version(release_dists.build).local == f"g{commit}"
    assert _build_names(release_dists.wheel) == (version, commit, release_dists.build)
    rebuilt = wheel_from_sdist(release_dists.sdist, tmp_path / "from-sdist", release_dists.epoch)
    assert _build_names(rebuilt) == (version, commit, release_dists.build)


def test_a_build_with_uncommitted_changes_says_so_and_one_without_git_names_no_commit(
    tmp_path: Path,
) -> None:
    """A tracked file changed after the commit: `.dirty` after the commit (that commit is not
    all of the build). A tree that is no git work tree (a copy inside no repository, or inside
    another one) names no commit: never a commit it was not built from."""
    version = project_version()
    tree = copy_checkout(tmp_path / "tree", version)
    commit = commit_tree(tree)
    (tree / "mcp_server" / "values.py").write_text(
        (tree / "mcp_server" / "values.py").read_text() + "\n# a local change\n"
    )
    _, dirty = build_dists(tree, tmp_path / "dirty", 1_700_000_000)
    assert _build_names(dirty) == (version, commit, f"{version}+g{commit}.dirty")
    inner = copy_checkout(tree / "vendored" / "copy", version)  # inside `tree`'s repository
    _, plain = build_dists(inner, tmp_path / "plain", 1_700_000_000)
    assert _build_names(plain) == (version, None, version)


def test_an_editable_install_names_no_commit(tmp_path: Path) -> None:
    """An editable install runs the work tree, which moves on after the install: it names the
    version alone, never the commit it happened to be installed at."""
    version = project_version()
    tree = copy_checkout(tmp_path / "tree", version)
    commit_tree(tree)
    venv = tmp_path / "venv"
    run_checked([uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)])
    run_checked(
        [uv_binary(), "pip", "install", "-q", "--no-deps", "--python", str(venv / "bin" / "python"),
         "-e", str(tree)]
    )  # fmt: skip
    names = run_checked(
        [str(venv / "bin" / "python"), "-c",
         "import mcp_server as m; print(m.__version__, m.__commit__, m.__build__)"]
    )  # fmt: skip
    assert names.stdout.split() == [version, "None", version]


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


def test_the_changelog_keeps_the_format_and_agrees_with_the_version() -> None:
    """CHANGELOG.md is Keep a Changelog 1.1.0 (an Unreleased section first, releases newest
    first with ISO dates, link references), and pyproject's version is what it says a build of
    this tree is (the release check, .ci/release_check.py, finds nothing)."""
    text = (REPO_ROOT / "CHANGELOG.md").read_text()
    assert release_check.version_problems(text, project_version()) == []


def test_a_build_with_unreleased_changes_carries_a_dev_version() -> None:
    """Between releases the version is the next one with .devN: while [Unreleased] lists
    changes, a build of this tree is never named as a release (issue 43, done when)."""
    text = (REPO_ROOT / "CHANGELOG.md").read_text()
    version = Version(project_version())
    released = [v for v, _day in release_check.released_versions(text)[0]]
    if release_check.unreleased_changes(text):
        assert version.is_devrelease, version
        assert version > max(released), (version, released)
    else:
        assert version in released, (version, released)


def test_the_changelog_check_fails_without_an_entry_or_with_a_bad_date() -> None:
    """The check above can fail: a version with no entry, a date that is not ISO, a release
    above Unreleased and an unknown change type are each named."""
    text = (REPO_ROOT / "CHANGELOG.md").read_text()
    assert release_check.version_problems(cut_release(text, "98.0.0", "2099-01-01"), "99.0.0") == [
        "no '## [99.0.0] - YYYY-MM-DD' entry for version 99.0.0"
    ]
    version, day = next(
        (str(v), d.isoformat()) for v, d in release_check.released_versions(text)[0]
    )
    heading = f"## [{version}] - {day}"
    y, m, d = day.split("-")
    broken = text.replace(heading, heading.replace(day, f"{d}.{m}.{y}"))
    assert any("has no ISO date" in p for p in release_check.version_problems(broken, version))
    swapped = text.replace("## [Unreleased]", "## [Later]", 1)
    assert "the first section is not '## [Unreleased]'" in release_check.version_problems(
        swapped, project_version()
    )
    first_type = release_check.CHANGE_TYPES[0]
    assert f"### {first_type}" in text
    odd = text.replace(f"### {first_type}", "### New stuff", 1)
    problems = release_check.version_problems(odd, project_version())
    assert any("'New stuff' is not one of" in p for p in problems)
