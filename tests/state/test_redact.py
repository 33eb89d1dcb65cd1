"""Credentials never land in a record, a log, an error or a tool result (rule 7).

Pure helpers first (`redact.strip_credentials`, `redact.redact_text`, `SetupError`), then the real
command line against a credentialed https URL on a loopback port that refuses at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_cli
from support.trees import env_snapshot

from mcp_server.children.uv import uv_binary
from mcp_server.environment.records import SourceIdentity
from mcp_server.errors import SetupError
from mcp_server.redact import REDACTED, redact_text, strip_credentials

SECRET = "s3cr3t-T0KEN"
# Port 9 (discard) on loopback: nothing listens, so git fails fast without leaving the machine.
CRED_URL = f"https://user:{SECRET}@127.0.0.1:9/x.git"
FULL_SHA = "0123456789abcdef0123456789abcdef01234567"


# --------------------------------------------------------------------------------------------
# strip_credentials: the URL as it may be recorded


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"https://user:{SECRET}@github.com/org/repo.git", "https://github.com/org/repo.git"),
        (f"https://{SECRET}@github.com/org/repo", "https://github.com/org/repo"),
        (f"https://oauth2:{SECRET}@host:8443/g/r.git", "https://host:8443/g/r.git"),
        (f"ssh://git:{SECRET}@host/org/repo.git", "ssh://host/org/repo.git"),
        (
            f"https://host/org/repo.git?access_token={SECRET}&ref=x",
            f"https://host/org/repo.git?access_token={REDACTED}&ref=x",
        ),
        (
            f"https://host/r?private_token={SECRET}",
            f"https://host/r?private_token={REDACTED}",
        ),
        (f"https://host/r?x=1&TOKEN={SECRET}", f"https://host/r?x=1&TOKEN={REDACTED}"),
    ],
)
def test_strip_credentials_removes_secrets(url: str, expected: str) -> None:
    stripped = strip_credentials(url)
    assert stripped == expected
    assert SECRET not in stripped


@pytest.mark.parametrize(
    "url",
    [
        "ssh://git@host/org/repo.git",  # a bare ssh user is not a secret and is kept
        "git@github.com:org/repo.git",  # scp-style: user kept
        "https://github.com/NVIDIA-TAO/tao-automl",
        "file:///srv/git/engine.git",
        "https://host/r?ref=main&depth=1",  # harmless query parameters are kept
    ],
)
def test_strip_credentials_keeps_urls_without_secrets(url: str) -> None:
    assert strip_credentials(url) == url


def test_strip_credentials_is_idempotent() -> None:
    once = strip_credentials(f"https://u:{SECRET}@h/r?token={SECRET}")
    assert strip_credentials(once) == once
    assert SECRET not in once


# --------------------------------------------------------------------------------------------
# redact_text: any text that may quote a URL


def test_redact_text_masks_userinfo_inside_messages() -> None:
    text = (
        f"fatal: unable to access 'https://user:{SECRET}@127.0.0.1:9/x.git/': refused\n"
        f"also ssh://deploy:{SECRET}@host/r and https://{SECRET}@host/r"
    )
    out = redact_text(text)
    assert SECRET not in out
    assert out.count(f"{REDACTED}@") == 3
    assert "fatal: unable to access 'https://***@127.0.0.1:9/x.git/': refused" in out


def test_redact_text_masks_token_query_parameters() -> None:
    out = redact_text(f"GET https://h/r.git?access_token={SECRET}&x=1 and https://h/b?sig={SECRET}")
    assert SECRET not in out
    assert f"access_token={REDACTED}&x=1" in out
    assert f"b?sig={REDACTED}" in out


def test_redact_text_keeps_ssh_user_and_plain_text() -> None:
    text = "cloning ssh://git@host/org/repo.git and git@host:org/repo (nothing secret)"
    assert redact_text(text) == text


def test_redact_text_agrees_with_strip_credentials_on_raw_at_sign() -> None:
    url = "https://user:p4ss@w0rd-TAIL@host/org/repo.git"
    assert strip_credentials(url) == "https://host/org/repo.git"
    assert "w0rd-TAIL" not in redact_text(f"fatal: unable to access '{url}'")


def test_setup_error_redacts_cause_remedy_and_details() -> None:
    err = SetupError(
        "fetch",
        f"could not reach {CRED_URL}",
        f"check {CRED_URL}",
        details=[f"uv: {CRED_URL}?token={SECRET}"],
    )
    assert SECRET not in err.full_text()
    assert SECRET not in str(err)
    assert err.full_text().startswith("fetch: could not reach https://***@127.0.0.1:9/x.git")


def test_source_identity_built_from_a_stripped_url_holds_no_secret() -> None:
    source = SourceIdentity(
        repository=strip_credentials(f"https://x-access-token:{SECRET}@github.com/o/r.git"),
        subdirectory="packages/automl-core",
        requested_ref="refs/heads/main",
        commit=FULL_SHA,
        subtree_id=FULL_SHA,
        commit_time=0,
    )
    dumped = source.model_dump_json()
    assert SECRET not in dumped
    assert json.loads(dumped)["repository"] == "https://github.com/o/r.git"


# --------------------------------------------------------------------------------------------
# The real command line with a credentialed URL


def _secret_files(root: Path) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and SECRET.encode() in path.read_bytes():
            hits.append(str(path))
    return hits


@pytest.fixture
def bare_env(tmp_path: Path) -> Path:
    """A real (empty) venv as an install target."""
    env_dir = tmp_path / "env"
    subprocess.run(
        [uv_binary(), "venv", "--quiet", "--python", sys.executable, str(env_dir)],
        check=True,
        capture_output=True,
    )
    return env_dir


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_credentialed_url_never_printed_or_written(
    tmp_path: Path, bare_env: Path, as_json: bool
) -> None:
    work_tmp = tmp_path / "tmp"
    work_tmp.mkdir()
    env = {"TMPDIR": str(work_tmp)}
    json_flag = ["--json"] if as_json else []
    before = env_snapshot(bare_env)
    runs = [
        run_cli("resolve", "--branch", "main", "--repository", CRED_URL, *json_flag, env=env),
        run_cli(
            "install",
            "--branch",
            "main",
            "--python",
            str(bare_env),
            "--repository",
            CRED_URL,
            *json_flag,
            env=env,
        ),
        # By commit the resolve step is skipped and git fetch itself meets the URL.
        run_cli(
            "install",
            "--commit",
            FULL_SHA,
            "--python",
            str(bare_env),
            "--repository",
            CRED_URL,
            *json_flag,
            env=env,
        ),
        run_cli(
            "install",
            "--commit",
            FULL_SHA,
            "--python",
            str(tmp_path / "new-env"),
            "--create-env",
            "--repository",
            f"https://127.0.0.1:9/x.git?access_token={SECRET}",
            *json_flag,
            env=env,
        ),
    ]
    steps = ["resolve", "resolve", "fetch", "fetch"]
    for result, step in zip(runs, steps, strict=True):
        assert result.code == 1, result.output
        assert SECRET not in result.output
        assert f"error: {step}:" in result.stderr
        assert "127.0.0.1" in result.stderr  # the URL is still named, only without its secret
        if as_json:
            error = json.loads(result.stdout)["error"]
            assert error["step"] == step
            assert error["exit_code"] == 1
    assert env_snapshot(bare_env) == before
    assert not (tmp_path / "new-env").exists()
    assert _secret_files(tmp_path) == []
    assert list(work_tmp.glob("automl-setup-work-*")) == []
