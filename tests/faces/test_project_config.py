"""Engine choice shared by both faces: the project file (found upward), AUTOML_SETUP_PROFILE,
flags; `config show`; `branches`; confirm-then-install (`--branch B --expect-commit C`) through
the command line and the MCP client, against a local repository named only in a project file;
and the refusal that explains a repository whose subdirectory is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from support.cli import run_cli
from support.engines import engine_marker
from support.mcp import Roots, call_ok, error_text
from support.trees import env_snapshot, tree_digest

from mcp_server.errors import InvalidInput
from mcp_server.faces.mcp.server import server
from mcp_server.source.config import (
    PROFILE_ENV,
    STORE_ENV,
    effective_profile,
    effective_settings,
    store_setting,
)
from mcp_server.source.profile import DEFAULT_REPOSITORY
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

TABLE = "[tool.automl-setup]"


def _pyproject(project: Path, repo_url: str, **extra: str) -> Path:
    lines = ['[project]\nname = "my-study"\nversion = "0"\n', TABLE]
    lines += [f'{key} = "{value}"' for key, value in extra.items()]
    lines += [
        "[tool.automl-setup.engine]",
        f'repository = "{repo_url}"',
        'subdirectory = "packages/automl-core"',
        f'distribution = "{REFERENCE_DISTRIBUTION}"',
    ]
    project.mkdir(parents=True, exist_ok=True)
    path = project / "pyproject.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[SourceRepository, Path]:
    """A repository with main and dev/next, and a project whose pyproject.toml names it (and a
    default workspace and environment); the commands run in a subdirectory of the project."""
    root = tmp_path_factory.mktemp("project-config")
    repo = SourceRepository(root / "repo")
    repo.commit_engine("main", marker="main-1")
    repo.commit_engine("dev/next", base="main", marker="dev-next-1")
    proj = root / "study"
    _pyproject(proj, repo.url, workspace="runs", python=".venv-train")
    (proj / "notebooks").mkdir()
    return repo, proj


# --------------------------------------------------------------------------------------------
# Precedence and config show


def test_precedence_flag_over_env_over_project_file_over_default(tmp_path: Path) -> None:
    bare = tmp_path / "bare"  # no project file anywhere above a pytest tmp dir
    bare.mkdir()
    assert effective_profile(bare, None, {}).origin == "built-in default"
    assert str(effective_profile(bare, None, {}).repository) == DEFAULT_REPOSITORY

    proj = tmp_path / "proj"
    label = f"{_pyproject(proj, 'file:///srv/from-project.git')} {TABLE}"
    (proj / "deep" / "er").mkdir(parents=True)
    found = effective_profile(proj / "deep" / "er", None, {})  # found upward
    assert (str(found.repository), found.origin) == ("file:///srv/from-project.git", label)

    named = tmp_path / "env-profile.toml"
    named.write_text('repository = "file:///srv/from-env.git"\n', encoding="utf-8")
    env = {PROFILE_ENV: str(named)}
    from_env = effective_profile(proj, None, env)
    assert (str(from_env.repository), from_env.origin) == (
        "file:///srv/from-env.git",
        f"{PROFILE_ENV}={named}",
    )
    flag = effective_profile(proj, None, env, repository="file:///srv/from-flag.git")
    assert str(flag.repository) == "file:///srv/from-flag.git"
    assert flag.origin == f"repository given, over {PROFILE_ENV}={named}"

    # In one directory the dedicated file wins; a pyproject.toml without the table is passed by.
    (proj / "automl-setup.toml").write_text(
        'workspace = "ws"\n[engine]\nrepository = "file:///srv/dedicated.git"\n', encoding="utf-8"
    )
    assert str(effective_profile(proj, None, {}).repository) == "file:///srv/dedicated.git"
    inner = proj / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n', encoding="utf-8")
    settings = effective_settings(inner, None, None, None, {})
    assert settings.project_file == str(proj / "automl-setup.toml")
    assert (settings.workspace.value, settings.python.value) == (str(proj / "ws"), None)


def test_config_show_prints_every_setting_and_its_source(
    project: tuple[SourceRepository, Path],
) -> None:
    repo, proj = project
    label = f"{proj / 'pyproject.toml'} {TABLE}"
    text = run_cli("config", "show", cwd=proj / "notebooks")
    assert text.code == 0, text.output
    assert f"project file:  {label}" in text.stdout
    assert f"from {repo.url} (packages/automl-core)" in text.stdout
    assert f"python:        {proj / '.venv-train'}  ({label})" in text.stdout
    assert f"workspace:     {proj / 'runs'}  ({label})" in text.stdout
    shown = run_cli(
        "config", "show", "--json", "--workspace", "elsewhere",
        cwd=proj, env={PROFILE_ENV: ""},
    )  # fmt: skip
    data = json.loads(shown.stdout)
    assert data["engine"]["source"] == label and data["engine"]["repository"] == repo.url
    assert data["workspace"] == {"value": "elsewhere", "source": "given"}
    assert data["python"]["source"] == label

    # The project's workspace is the commands' default; without one they refuse (exit 2).
    listed = _json(run_cli("list", "--json", cwd=proj / "notebooks"))
    assert listed["workspace"] == str(proj / "runs")
    bare = proj.parent / "no-project"
    bare.mkdir()
    refused = run_cli("list", cwd=bare)
    assert refused.code == 2
    assert "validate: no --workspace given, and no project file names one" in refused.stderr
    assert list(bare.iterdir()) == []


def test_bad_project_file_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "automl-setup.toml").write_text('engine = "x"\nworkspce = "typo"\n', encoding="utf-8")
    before = tree_digest(tmp_path)
    with pytest.raises(InvalidInput, match="unknown keys workspce"):
        effective_profile(proj, None, {})
    result = run_cli("resolve", "--json", cwd=proj)
    assert result.code == 2, result.output
    error = json.loads(result.stdout)["error"]
    assert error["step"] == "project configuration"
    assert "automl-setup.toml: unknown keys workspce" in error["cause"]
    assert tree_digest(tmp_path) == before


# --------------------------------------------------------------------------------------------
# branches -> resolve -> install --branch --expect-commit, named only in the project file


def _json(result: Any) -> dict[str, Any]:
    assert result.code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.slow
def test_cli_branches_resolve_install_confirmed_commit(
    project: tuple[SourceRepository, Path],
) -> None:
    repo, proj = project
    here = proj / "notebooks"
    label = f"{proj / 'pyproject.toml'} {TABLE}"
    listing = _json(run_cli("branches", "--json", cwd=here))
    heads = {b["branch"]: b["commit"] for b in listing["branches"]}
    assert heads == {"main": repo.head("main"), "dev/next": repo.head("dev/next")}
    assert listing["profile_source"]["source"] == label
    resolved = _json(run_cli("resolve", "--branch", "dev/next", "--json", cwd=here))
    assert resolved["commit"] == heads["dev/next"]

    result = run_cli(
        "install", "--branch", "dev/next", "--expect-commit", resolved["commit"], "--create-env",
        cwd=here,
    )  # fmt: skip
    assert result.code == 0, result.output
    assert f"engine: {REFERENCE_DISTRIBUTION} from {repo.url} ({label})" in result.stdout
    env = proj / ".venv-train"  # the project file's environment
    record = json.loads((env / ".automl-setup" / "engine-record.json").read_text())
    assert record["source"]["requested_ref"] == "refs/heads/dev/next"
    assert record["source"]["commit"] == resolved["commit"]
    assert engine_marker(env) == "dev-next-1"

    # The branch moves after the user confirmed its commit: refused, nothing changes.
    confirmed = resolved["commit"]
    repo.commit_engine("dev/next", marker="dev-next-2")
    before = env_snapshot(env)
    moved = run_cli(
        "install", "--branch", "dev/next", "--expect-commit", confirmed, "--json", cwd=here
    )
    assert moved.code == 1, moved.output
    error = json.loads(moved.stdout)["error"]
    assert error["step"] == "resolve"
    assert error["cause"].startswith(
        f"refs/heads/dev/next now points at {repo.head('dev/next')}, not at {confirmed}"
    )
    assert f"--expect-commit {repo.head('dev/next')}" in error["remedy"]
    assert env_snapshot(env) == before
    assert engine_marker(env) == "dev-next-1"
    fresh = proj / ".venv-new"
    again = run_cli(
        "install", "--branch", "dev/next", "--expect-commit", confirmed, "--python", str(fresh),
        "--create-env", cwd=here,
    )  # fmt: skip
    assert again.code == 1 and "the commit that was confirmed" in again.stderr
    assert not fresh.exists()


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_branches_resolve_install_confirmed_commit(
    project: tuple[SourceRepository, Path],
) -> None:
    """No profile argument: the project file is found from the client's first root (the
    second holds the file:// repository, which roots confine like any path)."""
    repo, proj = project
    label = f"{proj / 'pyproject.toml'} {TABLE}"
    env = proj / ".venv-mcp"
    async with Client(server, list_roots_callback=Roots(proj, repo.root)) as client:
        listing = await call_ok(client, "list_branches", {"with_subdirectory": True})
        assert listing["profile_source"]["source"] == label
        assert {b["branch"] for b in listing["branches"]} == {"main", "dev/next"}
        resolved = await call_ok(client, "resolve_branch", {"branch": "main"})
        assert resolved["commit"] == repo.head("main")
        wrong = {"python": str(env), "branch": "main", "create_env": True}
        refused = await client.call_tool(
            "install_engine", {**wrong, "expect_commit": repo.head("dev/next")}
        )
        assert error_text(refused, "install_engine").startswith(
            f"resolve: refs/heads/main now points at {repo.head('main')}"
        )
        assert not env.exists()
        out = await call_ok(
            client, "install_engine", {**wrong, "expect_commit": resolved["commit"]}
        )
    assert out["record"]["source"]["requested_ref"] == "refs/heads/main"
    assert out["record"]["source"]["commit"] == resolved["commit"]
    assert out["profile_source"]["source"] == label
    assert f"engine: {REFERENCE_DISTRIBUTION} from {repo.url} ({label})" in out["message"]
    assert engine_marker(env) == "main-1"


# --------------------------------------------------------------------------------------------
# The real repository's layout: the application at the root, the core on some branches


@pytest.mark.slow
def test_missing_subdirectory_says_what_the_commit_holds(tmp_path: Path) -> None:
    repo = SourceRepository(tmp_path / "tao", subdirectory="tao_app")
    app = '[project]\nname = "nvidia-tao-automl"\nversion = "6.0.0"\n'
    helpers = '[project]\nname = "tao-helpers"\nversion = "1"\n'
    files = {"pyproject.toml": app, "packages/helpers/pyproject.toml": helpers}
    repo.commit_engine("main", marker="app", distribution="nvidia-tao-automl", files=files)
    repo.commit_engine("feature/app", base="main", marker="app-2")
    repo.subdirectory = "packages/automl-core"
    repo.commit_engine("dev/core", base="main", marker="core", distribution="nvidia-automl-core")
    flags = ["--repository", repo.url]  # the default subdirectory and distribution

    env = tmp_path / "env"
    before = tree_digest(tmp_path)
    result = run_cli("install", "--python", str(env), "--create-env", *flags, cwd=tmp_path)
    assert result.code == 1, result.output
    assert "no --branch given: installing main, the default\n" in result.stderr
    assert (
        f"fetch: subdirectory 'packages/automl-core' does not exist at commit "
        f"{repo.head('main')[:12]}; at that commit the root pyproject.toml declares "
        "'nvidia-tao-automl' and packages/helpers/pyproject.toml declares 'tao-helpers'. "
        "nvidia-tao-automl (import tao_automl) is the separately published application, not "
        "the core (import automl_core): the core lives on branches whose head holds "
        "packages/automl-core"
    ) in result.stderr
    assert "automl-setup branches --with-subdirectory" in result.stderr
    assert not env.exists() and tree_digest(tmp_path) == before

    listing = _json(run_cli("branches", "--with-subdirectory", "--json", *flags, cwd=tmp_path))
    assert [b["branch"] for b in listing["branches"]] == ["dev/core"]
    assert listing["branches"][0]["commit"] == repo.head("dev/core")
    assert (listing["with_subdirectory"], listing["without_subdirectory"]) == (
        "packages/automl-core",
        2,
    )


def test_the_wheel_store_comes_from_the_env_var_then_the_project_file_then_the_cache(
    tmp_path: Path,
) -> None:
    """`store` in the project file moves the wheel store (relative to the file), the
    environment variable wins over it, and `config show` says which one is in use."""
    project = tmp_path / "study"
    _pyproject(project, (tmp_path / "engine.git").as_uri(), store="wheels-shared")
    environ = {"XDG_CACHE_HOME": str(tmp_path / "cache")}

    def shown(extra: dict[str, str]) -> dict[str, Any]:
        # run_cli adds to this process's environment: an empty value is an unset one
        result = run_cli("config", "show", "--json", cwd=project, env={STORE_ENV: "", **extra})
        assert result.code == 0, result.output
        return json.loads(result.stdout)["store"]

    assert shown({}) == {
        "value": str(project / "wheels-shared"),
        "source": f"{project / 'pyproject.toml'} {TABLE}",
    }
    assert shown({STORE_ENV: str(tmp_path / "elsewhere")}) == {
        "value": str(tmp_path / "elsewhere"),
        "source": STORE_ENV,
    }
    default = store_setting(None, environ)
    assert default.value == str(tmp_path / "cache" / "automl-setup")
    assert default.source == "default"
