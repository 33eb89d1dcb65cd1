"""EngineProfile: flags > TOML profile file > default, and invalid values refused with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_cli

from mcp_server.errors import ExitCode, InvalidInput
from mcp_server.source.profile import (
    DEFAULT_DISTRIBUTION,
    DEFAULT_REPOSITORY,
    DEFAULT_REQUIREMENT,
    DEFAULT_SUBDIRECTORY,
    EngineProfile,
    load_profile,
)


def _write(tmp_path: Path, text: str, name: str = "profile.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_default_profile_is_the_real_core() -> None:
    profile = load_profile()
    assert profile == EngineProfile()
    assert profile.repository == DEFAULT_REPOSITORY == "https://github.com/NVIDIA-TAO/tao-automl"
    assert profile.subdirectory == DEFAULT_SUBDIRECTORY == "packages/automl-core"
    assert profile.distribution == DEFAULT_DISTRIBUTION == "nvidia-automl-core"
    assert profile.requirement == DEFAULT_REQUIREMENT == "==0.1.0"
    assert profile.flags() == []


def test_file_wins_over_default_and_flags_win_over_file(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        'repository = "file:///srv/engine.git"\n'
        'subdirectory = "engine"\n'
        'distribution = "my-engine"\n'
        'requirement = ">=1,<2"\n',
    )
    assert load_profile(_write(tmp_path, 'distribution = "x"\n', "one.toml")).requirement == (
        DEFAULT_REQUIREMENT
    )  # a key absent from the file keeps its default
    from_file = load_profile(path)
    assert from_file.repository == "file:///srv/engine.git"
    assert from_file.subdirectory == "engine"
    assert from_file.distribution == "my-engine"
    assert from_file.requirement == ">=1,<2"

    merged = load_profile(path, repository="https://example.org/other.git", subdirectory=None)
    assert merged.repository == "https://example.org/other.git"  # flag over file
    assert merged.subdirectory == "engine"  # None means "flag not given": the file value stays
    assert merged.distribution == "my-engine"


def test_engine_table_form(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[engine]\nrepository = "git@host:org/engine.git"\ndistribution = "Engine_Core"\n',
    )
    profile = load_profile(path, requirement="==2.0")
    assert profile.repository == "git@host:org/engine.git"
    assert profile.distribution == "Engine_Core"
    assert profile.canonical_distribution == "engine-core"
    assert profile.requirement == "==2.0"
    assert profile.flags() == [
        "--repository",
        "git@host:org/engine.git",
        "--distribution",
        "Engine_Core",
        "--requirement",
        "==2.0",
    ]


def test_subdirectory_is_normalised() -> None:
    assert load_profile(subdirectory="./packages/./core").subdirectory == "packages/core"
    assert load_profile(subdirectory=".").subdirectory == "."


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"distribution": "a b"}, "distribution: not a distribution name"),
        ({"distribution": "core==0.1"}, "a bare distribution name is expected"),
        ({"distribution": "core[extra]"}, "a bare distribution name is expected"),
        ({"requirement": "~~1"}, "requirement: not a version specifier"),
        ({"colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"subdirectory": "../x"}, "contains '..'"),
        ({"subdirectory": "/etc"}, "must be a relative path"),
        ({"repository": "ext::sh -c id"}, "whitespace"),
        ({"repository": "ext::sh"}, "transport 'ext' is not allowed"),
        ({"repository": "http://host/r.git"}, "scheme 'http' is not allowed"),
    ],
)
def test_invalid_values_are_refused(overrides: dict[str, str], fragment: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_profile(**overrides)
    assert info.value.exit_code == ExitCode.INVALID_INPUT
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("repository = 5\n", "repository: Input should be a valid string"),
        ("colour = 'red'\n", "colour: Extra inputs are not permitted"),
        ("[engine]\nrequirement = 'one'\n", "requirement: not a version specifier"),
        ("repository = [[[\n", "cannot read profile file"),
    ],
)
def test_invalid_profile_files_are_refused(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_profile(_write(tmp_path, text))
    assert fragment in info.value.message


def test_missing_profile_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read profile file"):
        load_profile(tmp_path / "absent.toml")


@pytest.mark.parametrize("text", ['engine = "x"\n', "engine = 5\n"])
def test_engine_key_that_is_not_a_table_is_invalid_input(tmp_path: Path, text: str) -> None:
    with pytest.raises(InvalidInput):
        load_profile(_write(tmp_path, text))


def test_keys_outside_the_engine_table_are_not_silently_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, 'subdirectory = "engine"\n[engine]\ndistribution = "eng"\n')
    try:
        profile = load_profile(path)
    except InvalidInput:
        return  # refusing the ambiguous file is fine
    assert profile.subdirectory == "engine"


# --------------------------------------------------------------------------------------------
# Through the real command line: exit 2, a clear message, nothing touched


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--distribution", "not a name"], "error: profile: distribution: not a distribution name"),
        (["--requirement", "=>1"], "error: profile: requirement: not a version specifier"),
        (["--requirement", "0.1.0"], "error: profile: requirement: not a version specifier"),
        (["--subdirectory", "../up"], "error: validate subdirectory:"),
        (["--repository", "ftp://host/r.git"], "error: validate repository: scheme 'ftp'"),
    ],
)
def test_cli_refuses_invalid_profile_flags(tmp_path: Path, args: list[str], fragment: str) -> None:
    new_env = tmp_path / "new-env"
    for command in (
        ["resolve", "--branch", "main"],
        ["install", "--branch", "main", "--python", str(new_env), "--create-env"],
        ["verify", "--python", str(new_env)],
    ):
        result = run_cli(*command, *args)
        assert result.code == 2, result.output
        # The CLI catches every exception, so the refusal must be its one `error:` line.
        assert result.stderr.startswith(fragment) and result.stdout == "", result.output
    assert not new_env.exists()


def test_cli_refuses_invalid_profile_file(tmp_path: Path) -> None:
    path = _write(tmp_path, '[engine]\ndistribution = "x y"\n')
    result = run_cli("resolve", "--profile", str(path))
    assert result.code == 2, result.output
    assert "error: profile: distribution: not a distribution name: 'x y'" in result.stderr
    assert "remedy: fix the profile file or flag" in result.stderr

    result = run_cli("resolve", "--profile", str(tmp_path / "absent.toml"))
    assert result.code == 2, result.output
    assert "cannot read profile file" in result.stderr


def test_cli_flag_overrides_profile_file(tmp_path: Path) -> None:
    # The file names a repository refused by validation; the flag replaces it, so the refusal
    # that follows is about the flag's (also unreachable, but valid) URL, at the resolve step.
    path = _write(tmp_path, '[engine]\nrepository = "http://host/r.git"\n')
    refused = run_cli("resolve", "--profile", str(path))
    assert refused.code == 2
    assert "scheme 'http' is not allowed" in refused.stderr

    missing = tmp_path / "no-such-repo.git"
    result = run_cli("resolve", "--profile", str(path), "--repository", missing.as_uri(), "--json")
    assert result.code == 1, result.output
    assert "error: resolve:" in result.stderr
    assert "http://host" not in result.output
