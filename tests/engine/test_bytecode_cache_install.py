"""The bytecode cache in real installs: a second environment of a closure already seen gets all
its bytecode from the cache (hard links to the same files), and a rollback's restored packages
get theirs too."""

from __future__ import annotations

import re
import subprocess
from importlib.util import cache_from_source
from pathlib import Path

import pytest
from support.cli import profile_args, run_cli
from support.engines import install_main, make_venv, site_packages

from mcp_server import operations
from mcp_server.environment import transaction as transaction_module
from mcp_server.environment.probe import probe_interpreter
from mcp_server.errors import SetupError
from mcp_server.requests import InstallRequest
from mcp_server.source.profile import load_profile
from mcp_server.source.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    SourceRepository,
    reference_engine_source,
)
from mcp_server.source.wheelbuild import uv_binary
from mcp_server.target_side.bytecode import CHECKED_HASH, loaded
from mcp_server.target_side.bytecode import current as current_pyc


def bytecode_inodes(site: Path, package: str) -> dict[str, int]:
    """Each bytecode file of `package` in `site`, by its path there, and its inode."""
    return {
        str(p.relative_to(site)): p.stat().st_ino for p in sorted((site / package).rglob("*.pyc"))
    }


def test_a_second_environment_gets_all_its_bytecode_from_the_cache(
    source_repo: SourceRepository, tmp_path: Path
) -> None:
    first = site_packages(install_main(tmp_path / "one", source_repo))
    second_env = tmp_path / "two"
    result = run_cli(
        "install", "--branch", "main", "--python", str(second_env), "--create-env",
        *profile_args(source_repo),
    )  # fmt: skip
    assert result.code == 0, result.output
    assert re.search(r"bytecode: 0 files compiled, [1-9]\d* from the cache", result.output)
    second = site_packages(second_env)
    # A dependency's bytecode is the very same files (hard links to the cache's entries) ...
    linked = bytecode_inodes(first, "pydantic")
    assert linked and bytecode_inodes(second, "pydantic") == linked
    # ... the engine's own are copies of them: an edit in place stays in its environment.
    ours, theirs = (
        bytecode_inodes(first, "automl_refengine"),
        bytecode_inodes(second, "automl_refengine"),
    )
    assert ours.keys() == theirs.keys() and not set(ours.values()) & set(theirs.values())
    for pyc in (second / "automl_refengine").rglob("*.pyc"):
        data = pyc.read_bytes()
        assert data == (first / pyc.relative_to(second)).read_bytes()
        source = pyc.parent.parent / (pyc.name.split(".")[0] + ".py")
        assert int.from_bytes(data[4:8], "little") == CHECKED_HASH
        assert loaded(str(source), data)


@pytest.fixture
def pinned_repo(tmp_path: Path) -> SourceRepository:
    """`main` needing pathspec (any version: the environment's 0.11.2 stays) and `dev/next`
    needing pathspec >= 0.12 (uv upgrades it; a rollback puts 0.11.2 back)."""
    repo = SourceRepository(tmp_path / "repo")
    pyproject = (reference_engine_source() / "pyproject.toml").read_text()
    files = {}
    for branch, requirement in (("main", "pathspec"), ("dev/next", "pathspec>=0.12")):
        text, count = re.subn(
            r"(?m)^dependencies = \[", f'dependencies = ["{requirement}", ', pyproject
        )
        assert count == 1
        files = {f"{repo.subdirectory}/pyproject.toml": text}
        repo.commit_engine(branch, base="main" if branch != "main" else None, files=files)
    return repo


def test_a_rollbacks_restored_dependency_gets_its_bytecode(
    pinned_repo: SourceRepository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_venv(tmp_path / "env")
    python = env / "bin" / "python"
    subprocess.run(
        [uv_binary(), "pip", "install", "--quiet", "--python", str(python), "pathspec==0.11.2"],
        check=True, capture_output=True,
    )  # fmt: skip
    profile = load_profile(
        None,
        repository=pinned_repo.url,
        subdirectory=pinned_repo.subdirectory,
        distribution=REFERENCE_DISTRIBUTION,
        requirement=None,
    )
    operations.install(InstallRequest(profile=profile, python=str(env), branch="main"))
    site = site_packages(env)
    sources = sorted((site / "pathspec").rglob("*.py"))

    def current() -> list[Path]:
        return [s for s in sources if current_pyc(str(s), cache_from_source(str(s)))]

    assert sources and current() == sources  # compiled at install

    def fails_after_uv(self: object, *args: object) -> None:
        # The install of dev/next fails after uv upgraded pathspec: a disk that filled up.
        raise SetupError("install", "cannot write the bytecode (injected)", "free space")

    monkeypatch.setattr(transaction_module.Transaction, "_compile", fails_after_uv)
    with pytest.raises(SetupError, match="injected"):
        operations.install(InstallRequest(profile=profile, python=str(env), branch="dev/next"))
    assert probe_interpreter(python, []).versions["pathspec"] == "0.11.2"  # put back by uv
    assert current() == sources  # and its bytecode with it
