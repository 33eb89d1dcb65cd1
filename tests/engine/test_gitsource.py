"""The source value types (pure, fast), and gitsource: real branch -> commit resolution and
exact-commit fetches against real `file://` repositories built with SourceRepository."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mcp_server.children.bound import Watch
from mcp_server.children.git import run_git
from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.source import gitsource
from mcp_server.source.gitsource import FetchedSource, Resolution
from mcp_server.source.sourcerepo import SourceRepository
from mcp_server.values import BranchName, CommitId, RepositoryUrl, Subdirectory

validate_branch, validate_commit = BranchName, CommitId
validate_repository_url, validate_subdirectory = RepositoryUrl, Subdirectory


def resolve_branch(url: str, branch: str) -> Resolution:
    """The core call with its values built the way both faces build them."""
    return gitsource.resolve_branch(RepositoryUrl(url), BranchName(branch), Watch())


def fetch_commit(url: str, commit: str, subdirectory: str, dest: Path) -> FetchedSource:
    return gitsource.fetch_commit(
        RepositoryUrl(url), CommitId(commit), Subdirectory(subdirectory), dest, Watch()
    )


SUB = "packages/automl-core"

# --------------------------------------------------------------------------------------------
# Validation (pure helpers: no repository, no transport)


@pytest.mark.parametrize("name", ["main", "dev/next", "dev/feature-1.2", "release_v1", "ü-x"])
def test_valid_branch_names_pass_unchanged(name: str) -> None:
    assert validate_branch(name) == name


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        ("--upload-pack=touch /tmp/pwned", "starts with '-'"),
        ("-b", "starts with '-'"),
        ("a..b", "not a valid branch name"),
        ("x.lock", "not a valid branch name"),
        ("dev/x.lock/y", "not a valid branch name"),
        ("@{-1}", "not a valid branch name"),
        ("a@{b", "not a valid branch name"),
        ("main~1", "not a valid branch name"),
        ("main^", "not a valid branch name"),
        ("a:b", "not a valid branch name"),
        ("a b", "not a valid branch name"),
        ("a*", "not a valid branch name"),
        ("/main", "not a valid branch name"),
        ("main/", "not a valid branch name"),
        ("dev/.hidden", "not a valid branch name"),
        ("a\\b", "not a valid branch name"),
        ("HEAD", "is not a branch name"),
        ("refs/heads/main", "is not a branch name"),
        ("main\nevil", "control character"),
        ("main\x00--upload-pack=x", "control character"),
        ("main\r", "control character"),
        ("main\x7f", "control character"),
        ("b" * 201, "longer than 200"),
    ],
)
def test_invalid_branch_names_are_refused(name: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_branch(name)
    assert info.value.exit_code == ExitCode.INVALID_INPUT
    assert info.value.step == "validate branch"
    assert fragment in info.value.cause


def test_branch_check_ignores_the_current_repository(tmp_path: Path) -> None:
    """`@{-1}` must never be expanded against a repository around the working directory."""
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine("main", marker="m")
    repo.commit_engine("dev/prev", base="main", marker="p")  # leaves a previous branch in work
    cwd = os.getcwd()
    os.chdir(repo.work)
    try:
        with pytest.raises(InvalidInput):
            validate_branch("@{-1}")
        with pytest.raises(InvalidInput):
            validate_branch("@{upstream}")
    finally:
        os.chdir(cwd)


def test_full_commit_ids_only() -> None:
    sha1 = "a" * 40
    assert validate_commit(sha1) == sha1
    assert validate_commit(" " + "A" * 40 + "\n") == sha1  # normalised, still the full id
    assert validate_commit("b" * 64) == "b" * 64  # sha256 repositories
    for bad in ("a" * 7, "a" * 39, "a" * 41, "HEAD", "HEAD~1", "main", "g" * 40, "a" * 39 + "\x00"):
        with pytest.raises(InvalidInput, match="not a full commit id"):
            validate_commit(bad)


@pytest.mark.parametrize(
    ("subdirectory", "expected"),
    [("packages/automl-core", SUB), ("./packages/./automl-core", SUB), (".", "."), ("a", "a")],
)
def test_subdirectory_normalised(subdirectory: str, expected: str) -> None:
    assert validate_subdirectory(subdirectory) == expected


@pytest.mark.parametrize(
    ("subdirectory", "fragment"),
    [
        ("", "empty"),
        ("../x", "contains '..'"),
        ("packages/../../x", "contains '..'"),
        ("/abs", "must be a relative path"),
        ("/etc", "must be a relative path"),
        ("-x", "must be a relative path"),
        ("a\\..\\b", "must be a relative path"),
        ("c:/x", "must be a relative path"),
        ("a\nb", "control character"),
        ("a\x00b", "control character"),
    ],
)
def test_invalid_subdirectories_are_refused(subdirectory: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_subdirectory(subdirectory)
    assert fragment in info.value.cause


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/NVIDIA-TAO/tao-automl",
        "https://user:tok@host:8443/r.git",
        "ssh://git@host/org/r.git",
        "git@github.com:org/r.git",
        "file:///srv/git/r.git",
        "file://localhost/srv/git/r.git",
    ],
)
def test_allowed_repository_urls(url: str) -> None:
    value = RepositoryUrl(url)
    assert value.with_credentials == url
    assert value == url.replace("user:tok@", "")  # its text never holds the credential
    assert "tok" not in repr(value) and "tok" not in str(value)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ext::sh -c touch% /tmp/pwned", "whitespace"),
        ("ext::sh", "transport 'ext' is not allowed"),
        ("fd::3", "transport 'fd' is not allowed"),
        ("EXT::sh", "is not allowed"),
        ("http://host/r.git", "scheme 'http' is not allowed"),
        ("git://host/r.git", "scheme 'git' is not allowed"),
        ("--upload-pack=touch%20x", "starts with '-'"),
        ("https://-oProxyCommand=x/r", "no valid host"),
        ("ssh://-oProxyCommand=x/r", "no valid host"),
        ("git@-oProxyCommand=x:r", "not an allowed repository URL"),
        ("host:path", "not an allowed repository URL"),  # never a local path, never a guess
        ("/srv/git/r.git", "not an allowed repository URL"),
        ("file://otherhost/r.git", "absolute path"),
        ("https://host/r\n.git", "whitespace or a control character"),
        ("", "empty"),
    ],
)
def test_refused_repository_urls(url: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_repository_url(url)
    assert fragment in info.value.cause


def test_git_itself_refuses_ext_transport_even_without_validation(tmp_path: Path) -> None:
    """Defence in depth: run_git (GIT_ALLOW_PROTOCOL, protocol.ext.allow=never) blocks ext::
    for a caller that skipped validation; the payload never runs."""
    payload = tmp_path / "pwned"
    with pytest.raises(SetupError) as info:
        run_git(
            ["ls-remote", "--end-of-options", f"ext::sh -c touch% {payload}"],
            step="resolve",
            timeout=30,
            watch=Watch(),
        )
    assert "not allowed" in info.value.remedy or "not allowed" in info.value.cause
    assert not payload.exists()


def test_option_looking_values_after_end_of_options_are_inert(tmp_path: Path) -> None:
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine("main", marker="m")
    payload = tmp_path / "pwned"
    out = run_git(
        ["ls-remote", "--end-of-options", repo.url, f"--upload-pack=touch {payload}"],
        step="resolve",
        timeout=30,
        watch=Watch(),
    )
    assert out == ""  # treated as a (non-matching) ref pattern, not as an option
    assert not payload.exists()


# --------------------------------------------------------------------------------------------
# Resolve against real repositories


@pytest.fixture
def repo(tmp_path: Path) -> SourceRepository:
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine("main", marker="main-1")
    repo.commit_engine("dev/next", base="main", marker="dev-next-1")
    return repo


def test_resolve_main_and_dev_branch(repo: SourceRepository) -> None:
    main = resolve_branch(repo.url, "main")
    dev = resolve_branch(repo.url, "dev/next")
    assert (main.ref, main.commit) == ("refs/heads/main", repo.head("main"))
    assert (dev.ref, dev.commit) == ("refs/heads/dev/next", repo.head("dev/next"))
    assert main.commit != dev.commit
    assert main.repository == repo.url


def test_resolve_follows_a_moved_branch(repo: SourceRepository) -> None:
    first = resolve_branch(repo.url, "dev/next").commit
    second = repo.commit_engine("dev/next", marker="dev-next-2")
    assert resolve_branch(repo.url, "dev/next").commit == second != first


def test_branch_wins_over_a_tag_of_the_same_name(repo: SourceRepository) -> None:
    branch_commit = repo.commit_engine("release", base="main", marker="release-branch")
    tag_commit = repo.commit_engine("tag-source", base="main", marker="release-tag")
    repo.tag("release", tag_commit)
    repo.delete_branch("tag-source")
    assert tag_commit != branch_commit
    res = resolve_branch(repo.url, "release")
    assert (res.ref, res.commit) == ("refs/heads/release", branch_commit)


def test_tag_only_name_is_refused_and_says_tags_are_never_installed(
    repo: SourceRepository,
) -> None:
    repo.tag("v1.0", repo.head("dev/next"))
    with pytest.raises(SetupError) as info:
        resolve_branch(repo.url, "v1.0")
    assert info.value.step == "resolve"
    assert info.value.exit_code == ExitCode.REFUSED
    assert "branch 'v1.0' does not exist" in info.value.cause
    assert "tags are never installed" in info.value.cause


def test_missing_and_deleted_branches_are_refused(repo: SourceRepository) -> None:
    repo.commit_engine("dev/gone", base="main", marker="gone")
    assert resolve_branch(repo.url, "dev/gone").commit
    repo.delete_branch("dev/gone")
    for name in ("dev/gone", "no-such-branch", "next"):  # "next" is only a suffix of dev/next
        with pytest.raises(SetupError) as info:
            resolve_branch(repo.url, name)
        assert info.value.step == "resolve"
        assert f"branch {name!r} does not exist" in info.value.cause
        assert "tags are never installed" not in info.value.cause


def test_unreachable_repository_fails_at_resolve(tmp_path: Path) -> None:
    with pytest.raises(SetupError) as info:
        resolve_branch((tmp_path / "nowhere.git").as_uri(), "main")
    assert info.value.step == "resolve"
    assert info.value.cause.startswith("no repository at that path on this machine"), info.value
    assert "does not appear to be a git repository" in info.value.details[0]


# --------------------------------------------------------------------------------------------
# Fetch exactly one commit


def _git_out(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_fetch_gives_exactly_the_commit_and_its_subtree(
    repo: SourceRepository, tmp_path: Path
) -> None:
    old = repo.head("dev/next")
    new = repo.commit_engine("dev/next", marker="dev-next-2")
    fetched = fetch_commit(repo.url, old, SUB, tmp_path / "src")
    assert fetched.commit == old
    assert _git_out(fetched.checkout, "rev-parse", "HEAD") == old
    assert fetched.subtree_id == _git_out(repo.bare, "rev-parse", f"{old}:{SUB}")
    assert fetched.subtree_id != _git_out(repo.bare, "rev-parse", f"{new}:{SUB}")
    assert fetched.commit_time == int(_git_out(repo.bare, "show", "-s", "--format=%ct", old))
    assert fetched.source_dir == (tmp_path / "src" / SUB).resolve()
    marker = fetched.source_dir / "src" / "automl_refengine" / "_build_marker.py"
    assert "dev-next-1" in marker.read_text()
    # Only that commit came over (listing local objects never triggers a lazy fetch).
    objects = _git_out(
        fetched.checkout,
        "cat-file",
        "--batch-all-objects",
        "--batch-check=%(objectname) %(objecttype)",
    ).splitlines()
    assert [line.split()[0] for line in objects if line.endswith(" commit")] == [old]


def test_fetch_checks_out_only_the_subdirectory(repo: SourceRepository, tmp_path: Path) -> None:
    commit = repo.commit_engine(
        "dev/next", marker="x", files={"docs/big/notes.txt": "not part of the engine\n"}
    )
    fetched = fetch_commit(repo.url, commit, SUB, tmp_path / "src")
    assert (fetched.source_dir / "pyproject.toml").is_file()
    assert not (fetched.checkout / "docs").exists()


def test_fetch_refuses_a_commit_force_pushed_away_and_pruned(
    repo: SourceRepository, tmp_path: Path
) -> None:
    old = repo.commit_engine("dev/force", base="main", marker="force-old")
    repo.reset_branch("dev/force", repo.head("main"))
    new = repo.commit_engine("dev/force", marker="force-new", force=True)
    assert resolve_branch(repo.url, "dev/force").commit == new
    repo.gc_prune()
    with pytest.raises(SetupError) as info:
        fetch_commit(repo.url, old, SUB, tmp_path / "src")
    assert info.value.step == "fetch"
    assert f"commit {old} could not be fetched" in info.value.cause
    assert "force-pushed" in info.value.remedy


def _commit_symlink(repo: SourceRepository, branch: str, link: str, target: str) -> str:
    repo.commit_engine(branch, base="main", marker=branch, push=False)
    path = repo.work / link
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    _git_out(repo.work, "add", link)
    _git_out(repo.work, "commit", "-q", "-m", f"symlink {link} -> {target}")
    repo.push(branch)
    return repo.head(branch)


@pytest.mark.parametrize(
    ("link", "target", "subdirectory"),
    [
        ("packages/link", "../..", "packages/link"),
        ("packages/etc", "/etc", "packages/etc"),
        ("packages/alias", "automl-core", "packages/alias"),
        ("escape", "..", "escape/packages/automl-core"),
    ],
)
def test_symlinked_subdirectory_is_refused_at_fetch(
    repo: SourceRepository, tmp_path: Path, link: str, target: str, subdirectory: str
) -> None:
    commit = _commit_symlink(repo, "dev/symlink", link, target)
    with pytest.raises(SetupError) as info:
        fetch_commit(repo.url, commit, subdirectory, tmp_path / "src")
    assert info.value.step == "fetch"
    assert "is a symbolic link" in info.value.cause
    assert info.value.exit_code == ExitCode.REFUSED


def test_missing_subdirectory_is_refused_at_fetch(repo: SourceRepository, tmp_path: Path) -> None:
    commit = repo.head("main")
    with pytest.raises(SetupError, match="does not exist at commit"):
        fetch_commit(repo.url, commit, "packages/nope", tmp_path / "a")
    with pytest.raises(SetupError, match="is not a directory"):
        fetch_commit(repo.url, commit, f"{SUB}/pyproject.toml", tmp_path / "b")
