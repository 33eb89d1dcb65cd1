"""The start check's proof (environment/startcheck.py), remembered by the process that made it:
while nothing the engine's imports depended on changed, a second check starts no interpreter;
bytecode cut short or an edited source makes it check again and report the failure."""

from __future__ import annotations

from importlib.util import cache_from_source
from pathlib import Path

import pytest
from support.engines import install_main, site_packages

from mcp_server.environment import startcheck
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The start checks' argv, each still run (a spy on `command`, not a mock)."""
    runs: list[list[str]] = []

    def command(*args: str) -> list[str]:
        argv = real(*args)  # type: ignore[arg-type]
        runs.append(argv)
        return argv

    real = startcheck.command
    monkeypatch.setattr(startcheck, "command", command)
    monkeypatch.setattr(startcheck, "_proven", {})
    return runs


@pytest.fixture
def own_env(tmp_path: Path, source_repo: SourceRepository, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The engine installed with a wheel store and bytecode cache of this test's own: another
    test linking the same cached bytecode changes those files' ctime, which (rightly) keeps a
    start check running meanwhile from being remembered."""
    monkeypatch.setenv("AUTOML_SETUP_STORE", str(tmp_path / "store"))
    return install_main(tmp_path / "env", source_repo)


@pytest.mark.parametrize("change", ["cut-bytecode", "edited-source"])
def test_a_proven_start_is_not_checked_again_until_what_it_imported_changes(
    own_env: Path, started: list[list[str]], change: str
) -> None:
    python = own_env / "bin" / "python"
    assert startcheck.start_failure(python, REFERENCE_DISTRIBUTION) is None
    assert startcheck.start_failure(python, REFERENCE_DISTRIBUTION) is None
    assert len(started) == 1  # the second answer came from the proof
    source = site_packages(own_env) / "automl_refengine" / "cli.py"
    if change == "cut-bytecode":  # a new file renamed into place, as any writer does
        pyc = Path(cache_from_source(str(source)))
        cut = pyc.with_name("cut.tmp")
        cut.write_bytes(pyc.read_bytes()[:40])
        cut.replace(pyc)
    else:
        with source.open("a", encoding="utf-8") as f:
            f.write("\nraise RuntimeError('edited')\n")
    failure = startcheck.start_failure(python, REFERENCE_DISTRIBUTION)
    assert len(started) == 2
    assert failure is not None
    assert ("edited" if change == "edited-source" else "Error") in failure
    again = startcheck.start_failure(python, REFERENCE_DISTRIBUTION)
    assert (again, len(started)) == (failure, 3)  # a failure is never remembered
