"""Source installs through the real command line: real `file://` repositories, real `uv`, real
venvs. Every refusal is checked twice: the message and exit code, and that nothing changed."""

from __future__ import annotations

import json
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import CliResult, profile_args, run_cli
from support.engines import engine_marker
from support.trees import env_snapshot

from mcp_server.children.bound import Watch
from mcp_server.environment.install import InstallResult
from mcp_server.errors import ExitCode, InvalidInput
from mcp_server.requests import InstallRequest
from mcp_server.source.gitsource import fetch_commit
from mcp_server.source.profile import load_profile
from mcp_server.source.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    SourceRepository,
    reference_engine_source,
)
from mcp_server.source.wheelbuild import build_wheel
from mcp_server.values import CommitId, RepositoryUrl, Subdirectory

SUB = "packages/automl-core"
# A dependency uv cannot find (a local path that does not exist): fails with no network.
MISSING_DEP_URL = "file:///nonexistent/automl-setup-test/missing-local-dep"

FAILING_PYPROJECT = """\
[build-system]
requires = []
build-backend = "failing_backend"
backend-path = ["."]

[project]
name = "automl-refengine"
version = "0.1.0"
"""
FAILING_BACKEND = """\
def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("deliberate build failure of the test repository")
"""


def _git(cwd: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def commit_symlink(repo: SourceRepository, branch: str, link: str, target: str) -> str:
    """A commit on `branch` (from main) that adds the symbolic link `link -> target`."""
    repo.commit_engine(branch, base="main", marker=branch, push=False)
    path = repo.work / link
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    _git(repo.work, "add", link)
    _git(repo.work, "commit", "-q", "-m", f"symlink {link} -> {target}")
    repo.push(branch)
    return repo.head(branch)


def install(repo: SourceRepository, env_dir: Path, *args: str, **kw: dict[str, str]) -> CliResult:
    return run_cli("install", "--python", str(env_dir), *profile_args(repo), *args, **kw)


def installed(result: CliResult) -> InstallResult:
    assert result.code == 0, result.output
    return InstallResult.model_validate_json(result.stdout)


def assert_no_crash(result: CliResult) -> None:
    """automl-setup refused cleanly: no Python traceback out of its own code."""
    assert "mcp_server/" not in result.output, result.output


def work_dirs(tmpdir: Path) -> list[Path]:
    return sorted(tmpdir.glob("automl-setup-work-*"))


# --------------------------------------------------------------------------------------------
# One repository with every kind of bad branch, one env with `main` installed: each refusal
# runs against it and must leave it byte-identical.


@dataclass
class World:
    repo: SourceRepository
    env: Path
    root: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("install-world")
    repo = SourceRepository(root / "repo")
    repo.commit_engine("main", marker="main-1")
    repo.commit_engine("dev/next", base="main", marker="dev-next-1")
    repo.commit_engine("dev/tao-app", base="main", marker="tao", distribution="nvidia-tao-automl")
    repo.commit_engine(
        "dev/other-name", base="main", marker="other", distribution="automl-other-engine"
    )
    repo.commit_engine("dev/version", base="main", marker="v020", version="0.2.0")
    repo.commit_engine(
        "dev/broken-toml", base="main", files={f"{SUB}/pyproject.toml": "broken toml [[["}
    )
    repo.commit_engine(
        "dev/failing-backend",
        base="main",
        files={
            f"{SUB}/pyproject.toml": FAILING_PYPROJECT,
            f"{SUB}/failing_backend.py": FAILING_BACKEND,
        },
    )
    reference = (reference_engine_source() / "pyproject.toml").read_text()
    bad_dep, count = re.subn(
        r"(?m)^dependencies = \[",
        f'dependencies = ["missing-local-dep @ {MISSING_DEP_URL}", ',
        reference,
    )
    assert count == 1
    repo.commit_engine(
        "dev/bad-dep",
        base="main",
        marker="bad-dep",
        files={
            f"{SUB}/pyproject.toml": bad_dep
            + "\n[tool.hatch.metadata]\nallow-direct-references = true\n"
        },
    )
    repo.commit_engine("dev/deleted", base="main", marker="deleted")
    repo.delete_branch("dev/deleted")
    repo.tag("v-tag-only", repo.head("dev/next"))
    commit_symlink(repo, "dev/symlink-up", "packages/link", "../..")
    commit_symlink(repo, "dev/symlink-etc", "packages/etc", "/etc")
    env = root / "env"
    result = install(repo, env, "--branch", "main", "--create-env")
    assert result.code == 0, result.output
    return World(repo, env, root)


REFUSALS = [
    pytest.param(
        ["--branch", "dev/tao-app"],
        "check",
        [
            "builds distribution 'nvidia-tao-automl', not 'automl-refengine'",
            "nvidia-tao-automl (import tao_automl) is the separately published application, "
            "not the core",
        ],
        id="tao-application-not-core",
    ),
    pytest.param(
        ["--branch", "dev/other-name"],
        "check",
        ["builds distribution 'automl-other-engine', not 'automl-refengine'"],
        id="other-distribution",
    ),
    pytest.param(
        ["--branch", "dev/version"],
        "check",
        ["automl-refengine 0.2.0 does not satisfy the requirement '==0.1.0'"],
        id="version-misses-requirement",
    ),
    pytest.param(
        ["--branch", "dev/broken-toml"],
        "build",
        ["pyproject.toml of the engine does not parse"],
        id="broken-pyproject",
    ),
    pytest.param(
        ["--branch", "dev/failing-backend"],
        "build",
        ["building the wheel failed", "backend failing_backend", "deliberate build failure"],
        id="failing-build-backend",
    ),
    pytest.param(
        ["--branch", "dev/deleted"],
        "resolve",
        ["branch 'dev/deleted' does not exist"],
        id="deleted-branch",
    ),
    pytest.param(
        ["--branch", "v-tag-only"],
        "resolve",
        ["branch 'v-tag-only' does not exist", "tags are never installed"],
        id="tag-only-name",
    ),
    pytest.param(
        ["--branch", "dev/symlink-up", "--subdirectory", "packages/link"],
        "fetch",
        ["'packages/link' is a symbolic link"],
        id="symlink-subdirectory-up",
    ),
    pytest.param(
        ["--branch", "dev/symlink-etc", "--subdirectory", "packages/etc"],
        "fetch",
        ["'packages/etc' is a symbolic link"],
        id="symlink-subdirectory-etc",
    ),
    pytest.param(
        ["--branch", "main", "--extra", "gpu"],
        "check",
        ["has no extra 'gpu'", "nothing was installed"],
        id="extra-the-engine-lacks",
    ),
    pytest.param(
        ["--commit", "0" * 40],
        "fetch",
        [f"commit {'0' * 40} could not be fetched"],
        id="unknown-commit",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "step", "fragments"), REFUSALS)
def test_refusal_leaves_the_environment_untouched(
    world: World, tmp_path: Path, args: list[str], step: str, fragments: list[str]
) -> None:
    before = env_snapshot(world.env)
    result = install(world.repo, world.env, *args, env={"TMPDIR": str(tmp_path)})
    assert result.code == ExitCode.REFUSED, result.output
    assert f"error: {step}: " in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr
    assert_no_crash(result)
    # Nothing changed: files byte-identical, the previous engine imports, no work dir left.
    assert env_snapshot(world.env) == before
    assert engine_marker(world.env) == "main-1"
    assert work_dirs(tmp_path) == []
    verify = run_cli("verify", "--python", str(world.env), *profile_args(world.repo))
    assert verify.code == 0, verify.output


@pytest.mark.slow
def test_refusal_as_json_names_the_step(world: World, tmp_path: Path) -> None:
    before = env_snapshot(world.env)
    result = install(
        world.repo, world.env, "--branch", "dev/version", "--json", env={"TMPDIR": str(tmp_path)}
    )
    assert result.code == 1
    error = json.loads(result.stdout)["error"]
    assert error["step"] == "check"
    assert error["exit_code"] == 1
    assert "0.2.0" in error["cause"]
    assert error["remedy"]
    assert env_snapshot(world.env) == before


@pytest.mark.slow
def test_uv_failure_at_the_install_step_rolls_back(world: World, tmp_path: Path) -> None:
    """A failure inside the environment transaction (after the journal): the previous engine
    comes back byte for byte and the history says what was rolled back."""
    history = world.env / ".automl-setup" / "history.jsonl"
    before = env_snapshot(world.env)
    history_before = history.read_bytes()
    result = install(
        world.repo, world.env, "--branch", "dev/bad-dep", env={"TMPDIR": str(tmp_path)}
    )
    assert result.code == 1, result.output
    assert "error: install: uv exited with status" in result.stderr
    assert "the previous engine was restored" in result.stderr
    assert "missing-local-dep" in result.stderr  # uv's own words are passed on
    assert_no_crash(result)
    after = env_snapshot(world.env)
    key = ".automl-setup/history.jsonl"
    assert {k: v for k, v in after.items() if k != key} == {
        k: v for k, v in before.items() if k != key
    }
    added = history.read_bytes().removeprefix(history_before).decode().splitlines()
    assert len(added) == 1
    entry = json.loads(added[0])
    assert (entry["event"], entry["commit"]) == ("rolled-back", world.repo.head("dev/bad-dep"))
    assert "uv exited with status" in entry["detail"]
    assert not (world.env / ".automl-setup" / "journal.json").exists()
    assert engine_marker(world.env) == "main-1"
    assert work_dirs(tmp_path) == []
    assert run_cli("verify", "--python", str(world.env), *profile_args(world.repo)).code == 0


# --------------------------------------------------------------------------------------------
# Hostile input: exit 2 before anything runs, nothing created, no payload


def _hostile_cases(pwned: Path) -> list[tuple[str, list[str], str]]:
    full = "a" * 40
    return [
        ("upload-pack-branch", [f"--branch=--upload-pack=touch {pwned}"], "starts with '-'"),
        ("dash-b", ["--branch=-b"], "starts with '-'"),
        ("ext-with-spaces", ["--repository", f"ext::sh -c touch% {pwned}"], "whitespace"),
        ("ext-no-spaces", ["--repository", f"ext::touch%{pwned}"], "transport 'ext'"),
        ("upload-pack-url", [f"--repository=--upload-pack=touch%20{pwned}"], "starts with '-'"),
        ("dotdot", ["--branch", "a..b"], "not a valid branch name"),
        ("lock-suffix", ["--branch", "x.lock"], "not a valid branch name"),
        ("previous-branch", ["--branch", "@{-1}"], "not a valid branch name"),
        ("newline", ["--branch", "main\nevil"], "control character"),
        ("refs-prefix", ["--branch", "refs/tags/v1"], "is not a branch name"),
        ("subdir-parent", ["--subdirectory", "../x"], "contains '..'"),
        ("subdir-absolute", ["--subdirectory", "/abs"], "must be a relative path"),
        ("short-commit", ["--commit", "abc1234"], "not a full commit id"),
        ("revision-syntax", ["--commit", "HEAD~1"], "not a full commit id"),
        ("branch-and-commit", ["--branch", "main", "--commit", full], "not allowed with"),
        ("bad-extra", ["--extra", f"x;touch {pwned}"], "not a valid extra name"),
        ("ftp-scheme", ["--repository", "ftp://host/r.git"], "scheme 'ftp' is not allowed"),
        ("python-newline", ["--python", f"{pwned}\nx"], "control character"),
    ]


HOSTILE_IDS = [case[0] for case in _hostile_cases(Path("/x"))]


@pytest.mark.slow  # the shared `world` env is a real install (each case itself is fast)
@pytest.mark.parametrize("case_id", HOSTILE_IDS)
def test_hostile_input_is_refused_with_no_side_effect(
    world: World, tmp_path: Path, case_id: str
) -> None:
    pwned = tmp_path / "pwned"
    args, fragment = next((a, f) for i, a, f in _hostile_cases(pwned) if i == case_id)
    new_env = tmp_path / "new-env"
    before = env_snapshot(world.env)
    runs = [
        install(world.repo, world.env, *args),
        install(world.repo, new_env, "--create-env", *args),
    ]
    if not any(a.startswith(("--commit", "--extra", "--python")) for a in args):
        runs.append(run_cli("resolve", *profile_args(world.repo), *args))
    for result in runs:
        assert result.code == ExitCode.INVALID_INPUT, result.output
        assert fragment in result.stderr
        assert_no_crash(result)
    assert not pwned.exists()
    assert not new_env.exists()
    assert env_snapshot(world.env) == before
    assert engine_marker(world.env) == "main-1"


@pytest.mark.parametrize(
    ("branch", "commit", "extras", "fragment"),
    [
        ("main\x00--upload-pack=touch /tmp/x", None, [], "control character"),
        (None, "a" * 39 + "\x00", [], "not a full commit id"),
        ("main", "a" * 40, [], "more than one of a branch, a commit and a wheel"),
        (None, None, [], "no branch or commit given"),
        ("main", None, ["ok", "-x"], "not a valid extra name"),
    ],
)
def test_an_invalid_request_cannot_be_built(
    tmp_path: Path, branch: str | None, commit: str | None, extras: list[str], fragment: str
) -> None:
    """The request is the one place an install's values are checked: one that is not valid
    never exists, so nothing can run with it."""
    new_env = tmp_path / "new-env"
    with pytest.raises(InvalidInput) as info:
        InstallRequest(
            profile=load_profile(repository=(tmp_path / "repo.git").as_uri()),
            python=str(new_env),
            branch=branch,
            commit=commit,
            create_env=True,
            extras=extras,
        )
    assert fragment in info.value.cause
    assert not new_env.exists()


def test_a_request_holds_normalised_values() -> None:
    request = InstallRequest(profile=load_profile(), python=None, commit="A" * 40, extras=["a"])
    assert request.commit == "a" * 40 and request.branch is None


# --------------------------------------------------------------------------------------------
# Branches that move, tags, force-pushes


@pytest.mark.slow
def test_branch_moved_between_resolve_and_install(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    resolved = run_cli("resolve", "--branch", "dev/next", "--json", *profile_args(source_repo))
    assert resolved.code == 0, resolved.output
    c1 = json.loads(resolved.stdout)["commit"]
    assert c1 == source_repo.head("dev/next")
    c2 = source_repo.commit_engine("dev/next", marker="dev-next-2")

    by_branch = installed(install(source_repo, installed_env, "--branch", "dev/next", "--json"))
    assert by_branch.record.source.commit == c2
    assert by_branch.record.source.requested_ref == "refs/heads/dev/next"
    assert by_branch.previous_commit == source_repo.head("main")
    assert engine_marker(installed_env) == "dev-next-2"
    direct_url = json.loads(
        next(installed_env.glob("lib/python*/site-packages/automl_refengine-*.dist-info"))
        .joinpath("direct_url.json")
        .read_text()
    )
    assert direct_url["vcs_info"]["commit_id"] == c2
    assert direct_url["vcs_info"]["requested_revision"] == "dev/next"

    by_commit = installed(install(source_repo, installed_env, "--commit", c1, "--json"))
    assert by_commit.record.source.commit == c1
    assert by_commit.record.source.requested_ref is None
    assert engine_marker(installed_env) == "dev-next-1"
    assert run_cli("verify", "--python", str(installed_env), *profile_args(source_repo)).code == 0


@pytest.mark.slow
def test_branch_and_tag_with_the_same_name(
    source_repo: SourceRepository, installed_env: Path, tmp_path: Path
) -> None:
    branch_commit = source_repo.commit_engine("release", base="main", marker="release-branch")
    tag_commit = source_repo.commit_engine("tag-src", base="main", marker="release-tag")
    source_repo.tag("release", tag_commit)
    source_repo.delete_branch("tag-src")

    resolved = run_cli("resolve", "--branch", "release", *profile_args(source_repo))
    assert resolved.code == 0, resolved.output
    assert f"refs/heads/release -> {branch_commit}" in resolved.stdout
    assert tag_commit not in resolved.output

    result = installed(install(source_repo, installed_env, "--branch", "release", "--json"))
    assert result.record.source.commit == branch_commit
    assert result.record.source.requested_ref == "refs/heads/release"
    assert engine_marker(installed_env) == "release-branch"

    # A name that only a tag carries is refused, and says tags are never installed.
    source_repo.tag("only-a-tag", tag_commit)
    before = env_snapshot(installed_env)
    for command in (
        ["resolve", "--branch", "only-a-tag", *profile_args(source_repo)],
        [
            "install",
            "--branch",
            "only-a-tag",
            "--python",
            str(installed_env),
            *profile_args(source_repo),
        ],
    ):
        refused = run_cli(*command, env={"TMPDIR": str(tmp_path)})
        assert refused.code == 1, refused.output
        assert "error: resolve: branch 'only-a-tag' does not exist" in refused.stderr
        assert "tags are never installed" in refused.stderr
    assert env_snapshot(installed_env) == before
    assert engine_marker(installed_env) == "release-branch"


@pytest.mark.slow
def test_force_pushed_branch(
    source_repo: SourceRepository, installed_env: Path, tmp_path: Path
) -> None:
    old = source_repo.commit_engine("dev/force", base="main", marker="force-old")
    source_repo.reset_branch("dev/force", source_repo.head("main"))
    new = source_repo.commit_engine("dev/force", marker="force-new", force=True)
    assert new != old

    result = installed(install(source_repo, installed_env, "--branch", "dev/force", "--json"))
    assert result.record.source.commit == new
    assert engine_marker(installed_env) == "force-new"

    source_repo.gc_prune()
    before = env_snapshot(installed_env)
    refused = install(source_repo, installed_env, "--commit", old, env={"TMPDIR": str(tmp_path)})
    assert refused.code == 1, refused.output
    assert f"error: fetch: commit {old} could not be fetched" in refused.stderr
    assert "force-pushed" in refused.stderr
    assert env_snapshot(installed_env) == before
    assert engine_marker(installed_env) == "force-new"
    assert work_dirs(tmp_path) == []


# --------------------------------------------------------------------------------------------
# Reproducible builds


@pytest.mark.slow
def test_rebuild_of_the_same_commit_gives_the_same_wheel(
    source_repo: SourceRepository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A commit dated long ago, so a wheel stamped with the wall clock could not pass.
    for var in ("GIT_COMMITTER_DATE", "GIT_AUTHOR_DATE"):
        monkeypatch.setenv(var, "2001-02-03T04:05:06Z")
    commit = source_repo.commit_engine("dev/old", base="main", marker="old-date")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    monkeypatch.delenv("GIT_AUTHOR_DATE")

    records = []
    for name in ("env-a", "env-b"):
        result = installed(
            install(source_repo, tmp_path / name, "--commit", commit, "--create-env", "--json")
        )
        records.append(result.record)
    a, b = records
    assert a.source.commit_time == b.source.commit_time == 981173106
    assert a.install.environment != b.install.environment
    assert a.install.transaction != b.install.transaction
    assert a.build.wheel_sha256 == b.build.wheel_sha256
    assert a.build.record_digest == b.build.record_digest
    assert a.source.subtree_id == b.source.subtree_id
    assert a.identity_digest == b.identity_digest

    # The core function directly, from two separate checkouts.
    wheels = []
    for name in ("one", "two"):
        fetched = fetch_commit(
            RepositoryUrl(source_repo.url),
            CommitId(commit),
            Subdirectory(SUB),
            tmp_path / name,
            Watch(),
        )
        wheels.append(
            build_wheel(
                fetched.source_dir,
                tmp_path / f"dist-{name}",
                fetched.commit_time,
                sys.executable,
                tmp_path / f"build-{name}.log",
                Watch(),
            )
        )
    one, two = wheels
    assert one.sha256 == two.sha256 == a.build.wheel_sha256
    assert one.path.read_bytes() == two.path.read_bytes()
    assert one.backend == "hatchling.build"
    with zipfile.ZipFile(one.path) as zf:
        assert {info.date_time for info in zf.infolist()} == {(2001, 2, 3, 4, 5, 6)}


# --------------------------------------------------------------------------------------------
# History, unchanged reinstall, target selection


@pytest.mark.slow
def test_history_lists_installs_in_order(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    second = install(source_repo, installed_env, "--branch", "dev/next")
    assert second.code == 0, second.output
    result = run_cli("history", "--python", str(installed_env), "--json")
    assert result.code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["environment"] == str(installed_env)
    assert payload["torn_line"] is None
    entries = payload["entries"]
    assert [(e["event"], e["commit"], e["requested_ref"]) for e in entries] == [
        ("installed", source_repo.head("main"), "refs/heads/main"),
        ("installed", source_repo.head("dev/next"), "refs/heads/dev/next"),
    ]
    assert entries[0]["transaction"] != entries[1]["transaction"]
    assert all(e["distribution"] == REFERENCE_DISTRIBUTION for e in entries)

    text = run_cli("history", "--python", str(installed_env))
    assert text.code == 0
    lines = [line for line in text.stdout.splitlines() if "installed" in line]
    assert len(lines) == 2
    assert source_repo.head("main")[:12] in lines[0]
    assert source_repo.head("dev/next")[:12] in lines[1]


@pytest.mark.slow
def test_install_after_a_torn_history_line_keeps_the_history_readable(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    history = installed_env / ".automl-setup" / "history.jsonl"
    with history.open("ab") as fh:
        fh.write(b'{"time": "2026-01-01T00:00:00+00:00", "ev')  # a write cut short
    torn = run_cli("history", "--python", str(installed_env), "--json")
    assert torn.code == 0, torn.output
    assert json.loads(torn.stdout)["torn_line"] == 2

    result = install(source_repo, installed_env, "--branch", "dev/next")
    after = run_cli("history", "--python", str(installed_env), "--json")
    # Either the install refuses to append to a torn history, or the history stays readable.
    if result.code == 0:
        assert after.code == 0, after.output
        assert json.loads(after.stdout)["entries"][-1]["commit"] == source_repo.head("dev/next")
    else:
        assert "torn" in result.stderr
        assert engine_marker(installed_env) == "main-1"


@pytest.mark.slow
def test_same_commit_again_is_unchanged(source_repo: SourceRepository, installed_env: Path) -> None:
    before = env_snapshot(installed_env)
    again = install(source_repo, installed_env, "--branch", "main")
    assert again.code == 0, again.output
    assert again.stdout.startswith("already installed (unchanged):")
    assert env_snapshot(installed_env) == before  # not even a history line

    # The same commit over a modified engine is not "unchanged": it is installed again.
    (marker,) = installed_env.glob("lib/python*/site-packages/automl_refengine/_build_marker.py")
    marker.write_text('MARKER = "tampered"\n')
    assert engine_marker(installed_env) == "tampered"
    again = install(source_repo, installed_env, "--branch", "main")
    assert again.code == 0, again.output
    assert again.stdout.startswith("installed:")
    assert engine_marker(installed_env) == "main-1"
    assert (
        env_snapshot(installed_env)[str(marker.relative_to(installed_env))]
        == before[str(marker.relative_to(installed_env))]
    )
    assert run_cli("verify", "--python", str(installed_env), *profile_args(source_repo)).code == 0


@pytest.mark.slow
def test_virtual_env_stands_in_for_python(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    venv = {"VIRTUAL_ENV": str(installed_env)}
    result = run_cli("install", "--branch", "dev/next", *profile_args(source_repo), env=venv)
    assert result.code == 0, result.output
    assert f"into:     {installed_env}" in result.stdout
    assert engine_marker(installed_env) == "dev-next-1"
    verify = run_cli("verify", "--json", *profile_args(source_repo), env=venv)
    assert verify.code == 0, verify.output
    assert json.loads(verify.stdout)["commit"] == source_repo.head("dev/next")
    history = run_cli("history", "--json", env=venv)
    assert len(json.loads(history.stdout)["entries"]) == 2


def test_no_target_environment_is_invalid_input(tmp_path: Path) -> None:
    for command in (["install", "--branch", "main"], ["verify"], ["history"], ["repair"]):
        result = run_cli(*command)
        assert result.code == 2, result.output
        assert "no target environment given" in result.stderr


@pytest.mark.slow
def test_failed_install_with_create_env_removes_the_new_env(world: World, tmp_path: Path) -> None:
    for branch, step in (("no-such-branch", "resolve"), ("dev/broken-toml", "build")):
        new_env = tmp_path / f"new-{step}"
        result = install(
            world.repo, new_env, "--branch", branch, "--create-env", env={"TMPDIR": str(tmp_path)}
        )
        assert result.code == 1, result.output
        assert f"error: {step}:" in result.stderr
        assert not new_env.exists()
    assert work_dirs(tmp_path) == []


def test_missing_env_without_create_env_is_refused(tmp_path: Path) -> None:
    result = run_cli(
        "install",
        "--branch",
        "main",
        "--python",
        str(tmp_path / "absent"),
        "--repository",
        (tmp_path / "r.git").as_uri(),
    )
    assert result.code == ExitCode.NOTHING_INSTALLED, result.output
    assert "does not exist" in result.stderr
    assert "--create-env" in result.stderr
    assert not (tmp_path / "absent").exists()
