"""Private engine repositories over https, against a real HTTPS git server (git-http-backend
behind nginx, TLS from the test's own CA, Basic auth): the user's credential helper, CA bundle
and URL rewriting are used as they are, for git and for the git uv starts for a private
dependency; the token appears in no record, log, reply or command line; every failure names
its cause and remedy, changing nothing."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.cli import run_cli
from support.engines import engine_marker
from support.remotes import (
    DEPENDENCY,
    ClientHome,
    HttpsGitServer,
    PrivateEngine,
    Tls,
    assert_refused_at_resolve,
    free_port,
    install_private,
    make_tls,
    refusal_lines,
)


class ArgvWatch:
    """Every command line of every process on the machine, sampled while it runs."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.done.is_set():
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    try:
                        self.seen.add(
                            (entry / "cmdline")
                            .read_bytes()
                            .replace(b"\0", b" ")
                            .decode(errors="replace")
                        )
                    except OSError:
                        continue
            time.sleep(0.005)

    def __enter__(self) -> ArgvWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


@pytest.mark.slow
def test_a_token_reaches_no_record_log_reply_or_command_line(
    https_engine: PrivateEngine, https_server: HttpsGitServer, tmp_path: Path
) -> None:
    """The engine's URL carries the token (sent as a header), the dependency's comes from the
    user's credential helper through uv's git: installed, and the token is nowhere."""
    token = https_server.token
    url = https_engine.url.replace("https://", f"https://{https_server.user}:{token}@")
    target = tmp_path / "env"
    with ArgvWatch() as argv:
        result = install_private(https_engine, target, "--json", url=url)
    assert result.code == 0, result.output
    record = json.loads(result.stdout)["record"]
    assert record["source"]["repository"] == https_engine.url
    member = record["closure"][DEPENDENCY]["direct_url"]
    assert (member["url"], member["commit_id"]) == (
        https_engine.dependency_url,
        https_engine.dependency_commit,
    )
    assert engine_marker(target) == "private-dep"
    # Said once: the token on automl-setup's own command line was visible to others.
    assert result.stderr.count("visible to other users of this machine") == 1
    assert token not in result.stdout + result.stderr.replace(url, "")
    git_lines = [line for line in argv.seen if "git" in line or "uv" in line]
    assert len(git_lines) > 3, argv.seen  # the sampling saw the install's children
    ours = [line for line in argv.seen if "mcp_server.faces.cli" in line]
    assert all(token not in line for line in argv.seen if line not in ours), [
        line for line in argv.seen if token in line
    ]
    for path in [
        *target.joinpath(".automl-setup").rglob("*"),
        *Path(os.environ["AUTOML_SETUP_STORE"]).rglob("*"),
    ]:
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def test_a_url_rewritten_by_the_users_insteadof(
    https_engine: PrivateEngine, https_server: HttpsGitServer
) -> None:
    base = https_server.url("")
    https_engine.client.git_config(f"url.{base}.insteadOf", "https://git.example.invalid/")
    result = run_cli(
        "resolve", "--branch", "main",
        *https_engine.profile("https://git.example.invalid/engine.git"), "--json",
        env=https_engine.env(), whole_env=True,
    )  # fmt: skip
    assert result.code == 0, result.output
    assert json.loads(result.stdout)["commit"] == https_engine.engine.head("main")


CASES = {
    # case: (cause, git's own line, a piece of the remedy)
    "no credentials": (
        "asked for credentials and none were available",
        "could not read Username",
        "credential helper",
    ),
    "rejected token": (
        "rejected the credentials given (HTTP 401",
        "Authentication failed for",
        "renew the token",
    ),
    "forbidden": ("denies this repository to them (HTTP 403)", "returned error: 403", "access"),
    "no such repository": ("no repository at that path", "not found", "repository URL's path"),
    "untrusted certificate": (
        "is not trusted by git's certificate store",
        "server certificate verification failed",
        "sslCAInfo",
    ),
    "connection refused": ("refused the connection", "Couldn't connect to server", "server is up"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_https_failure_names_its_cause_and_changes_nothing(
    case: str, https_engine: PrivateEngine, https_server: HttpsGitServer, tmp_path: Path
) -> None:
    client, url = https_engine.client, https_engine.url
    store = client.home / ".git-credentials"
    if case == "no credentials":
        store.write_text("")
    elif case == "rejected token":
        store.write_text(https_server.credential_url(password="wrong-token") + "\n")
    elif case == "forbidden":
        store.write_text(https_server.credential_url(user="blocked") + "\n")
    elif case == "no such repository":
        url = https_server.url("missing.git")
    elif case == "untrusted certificate":
        client.trust_ca(make_tls(tmp_path / "other-ca").ca_cert)
    else:
        url = url.replace(f":{https_server.port}/", f":{free_port()}/")
    assert_refused_at_resolve(https_engine, url, tmp_path, CASES[case])


@pytest.mark.slow
def test_a_dependency_without_credentials_is_named_and_the_engine_kept(
    https_engine: PrivateEngine, https_server: HttpsGitServer, tmp_path: Path
) -> None:
    """The user gave the engine's token in its URL and has no credential helper: the engine is
    fetched, the private dependency cannot be; the refusal names it and says how to give git
    the credential, and the environment keeps its engine."""
    target = tmp_path / "env"
    first = install_private(https_engine, target, branch="main")
    assert first.code == 0, first.output
    before = (target / ".automl-setup" / "engine-record.json").read_bytes()
    (https_engine.client.home / ".git-credentials").write_text("")
    url = https_engine.url.replace("https://", f"https://{https_server.user}:{https_server.token}@")
    result = run_cli(
        "install", "--branch", "dev/private-dep", "--python", str(target),
        *https_engine.profile(url), env=https_engine.env(), whole_env=True,
    )  # fmt: skip
    assert result.code == 1, result.output
    first_line, remedy_line, said = refusal_lines(result.stderr)
    dependency = f"{DEPENDENCY} ({https_engine.dependency_url})"
    assert f"install: uv could not fetch the engine's dependency {dependency}" in first_line
    assert "asked for credentials and none were available" in first_line
    assert "credential helper" in remedy_line and ".mcp.json" in remedy_line
    assert "could not read Username" in said
    assert (target / ".automl-setup" / "engine-record.json").read_bytes() == before
    assert engine_marker(target) == "private-main"


@pytest.mark.anyio
async def test_the_mcp_face_names_the_cause_and_the_variables_its_client_must_pass(
    https_engine: PrivateEngine, tmp_path: Path
) -> None:
    (https_engine.client.home / ".git-credentials").write_text("")
    server = StdioServerParameters(
        command=str(Path(sys.executable).with_name("automl-setup-mcp")),
        env=https_engine.env(),
        cwd=str(tmp_path),
    )
    engine = {
        "repository": https_engine.url,
        "subdirectory": https_engine.engine.subdirectory,
        "distribution": "automl-refengine",
    }
    with (tmp_path / "server.log").open("w") as errlog:
        async with Client(stdio_client(server, errlog=errlog)) as client:
            result = await client.call_tool("resolve_branch", {"branch": "main", "profile": engine})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "resolve: " in text and "asked for credentials and none were available" in text
    assert "`env` of the server in .mcp.json" in text and "env_vars" in text
    assert "could not read Username" in text


@pytest.mark.anyio
async def test_a_token_in_the_mcp_profile_never_reaches_the_reply(
    https_engine: PrivateEngine, https_server: HttpsGitServer, tmp_path: Path
) -> None:
    (https_engine.client.home / ".git-credentials").write_text("")  # the URL's token alone
    token = https_server.token
    url = https_engine.url.replace("https://", f"https://{https_server.user}:{token}@")
    server = StdioServerParameters(
        command=str(Path(sys.executable).with_name("automl-setup-mcp")),
        env=https_engine.env(),
        cwd=str(tmp_path),
    )
    engine = {"repository": url, "subdirectory": https_engine.engine.subdirectory,
              "distribution": "automl-refengine"}  # fmt: skip
    with (tmp_path / "server.log").open("w") as errlog:
        async with Client(stdio_client(server, errlog=errlog)) as client:
            result = await client.call_tool("resolve_branch", {"branch": "main", "profile": engine})
    assert not result.is_error, result.content
    reply = json.dumps(result.structured_content) + result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content["commit"] == https_engine.engine.head("main")
    assert result.structured_content["repository"] == https_engine.url
    assert token not in reply
    assert token not in (tmp_path / "server.log").read_text()


def test_the_test_ca_is_the_only_trust(client_home: ClientHome, tls: Tls) -> None:
    """The client trusts the test CA through its own git configuration, never through a
    variable of this machine that would hide an untrusted-certificate case."""
    assert not any(k.startswith("GIT_SSL") for k in client_home.env())
