"""Locating the target environment: venv directory, interpreter path, --create-env."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_server.environment.create import open_for_install
from mcp_server.environment.target import locate
from mcp_server.errors import ExitCode, InvalidInput, SetupError


def test_create_env_given_an_interpreter_path_creates_the_venv_around_it(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError),
        open_for_install(str(tmp_path / "new" / "bin" / "python"), create=True) as env,
    ):
        assert env.created == tmp_path / "new"
        assert env.prefix == tmp_path / "new"
        assert env.interpreter == tmp_path / "new" / "bin" / "python"
        assert (tmp_path / "new" / "pyvenv.cfg").is_file()
        raise RuntimeError("the install failed")  # a failure removes what this call made
    assert not (tmp_path / "new").exists()


def test_create_env_given_a_directory_creates_the_venv_there(tmp_path: Path) -> None:
    with open_for_install(str(tmp_path / "venv"), create=True) as env:
        assert env.created and env.prefix == tmp_path / "venv"
    with open_for_install(str(tmp_path / "venv"), create=True) as again:
        assert not again.created and again.prefix == env.prefix


def test_a_missing_environment_without_create_env_is_nothing_installed(tmp_path: Path) -> None:
    with pytest.raises(SetupError) as refused:
        locate(str(tmp_path / "absent"))
    assert refused.value.exit_code == ExitCode.NOTHING_INSTALLED
    assert "--create-env" in refused.value.message
    assert not (tmp_path / "absent").exists()


def test_a_directory_that_is_not_a_venv_is_invalid_input(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInput) as refused:
        locate(str(tmp_path / "plain"))
    assert "not a virtual environment" in refused.value.message
    assert list((tmp_path / "plain").iterdir()) == []
