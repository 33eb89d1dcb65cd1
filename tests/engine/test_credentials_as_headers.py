"""A credential in a repository URL reaches git only as an HTTP header, never on a command
line: not on git's own argv and not on the argv of the remote helper git starts for https
(`git remote-https NAME URL`). A local HTTPS server (self-signed, trusted for this test only)
logs the Authorization header it receives; wrappers in a private GIT_EXEC_PATH, first on PATH
too, log the argv of every git process, including the helpers git itself spawns."""

from __future__ import annotations

import base64
import http.server
import os
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp import Client
from support.cli import run_cli

from mcp_server.children.bound import Watch
from mcp_server.errors import SetupError
from mcp_server.faces.mcp.server import server
from mcp_server.redact import redact_text
from mcp_server.source import gitsource
from mcp_server.values import CommitId, RepositoryUrl, Subdirectory

SECRET = "tok3n-S3CRET-on-the-wire"
USER = "deploy"


@dataclass
class Remote:
    url: str  # https://USER:SECRET@127.0.0.1:PORT/org/repo.git
    authorizations: list[str] = field(default_factory=list)


@pytest.fixture
def https_remote(tmp_path: Path) -> Iterator[Remote]:
    """An HTTPS server that records every Authorization header and answers 401."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    port = httpd.server_address[1]
    try:
        yield Remote(f"https://{USER}:{SECRET}@127.0.0.1:{port}/org/repo.git", seen)
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def argv_log(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Environment under which every git process, and every remote helper, logs its argv."""
    real = Path(
        subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip()
    )
    exec_dir, log = tmp_path / "git-exec", tmp_path / "argv.log"
    exec_dir.mkdir()
    logged = {"git": shutil.which("git"), "git-remote-https": str(real / "git-remote-https")}
    for entry in real.iterdir():
        if entry.name not in logged:
            (exec_dir / entry.name).symlink_to(entry)
    for name, target in logged.items():
        wrapper = exec_dir / name
        wrapper.write_text(
            "#!/bin/sh\n"
            f'printf "%s\\037" "$0" "$@" >> "{log}"\n'
            f'printf "\\n" >> "{log}"\n'
            f'exec "{target}" "$@"\n'
        )
        wrapper.chmod(0o755)
    env = {
        "GIT_EXEC_PATH": str(exec_dir),
        "PATH": f"{exec_dir}{os.pathsep}{os.environ['PATH']}",
        "GIT_SSL_NO_VERIFY": "1",  # the test server's self-signed certificate
    }
    return env, log


def _argvs(log: Path) -> list[list[str]]:
    return [line.split("\x1f")[:-1] for line in log.read_text().splitlines()]


def _assert_header_not_argv(remote: Remote, log: Path) -> None:
    expected = "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()
    assert expected in remote.authorizations, remote.authorizations
    argvs = _argvs(log)
    helpers = [a for a in argvs if a[0].endswith("git-remote-https")]
    assert helpers, argvs  # the helper git spawns was seen, with the URL git gave it
    assert all(SECRET not in arg and USER not in arg for a in argvs for arg in a), argvs


def _assert_nothing_holds(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), path


def test_resolve_sends_the_credential_as_a_header_only(
    https_remote: Remote, argv_log: tuple[dict[str, str], Path]
) -> None:
    env, log = argv_log
    result = run_cli("resolve", "--branch", "main", "--repository", https_remote.url, env=env)
    assert result.code == 1 and "rejected the credentials" in result.stderr, result.output
    assert SECRET not in result.output
    _assert_header_not_argv(https_remote, log)


def test_fetch_sends_the_credential_as_a_header_only(
    https_remote: Remote,
    argv_log: tuple[dict[str, str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env, log = argv_log
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    dest = tmp_path / "checkout"
    with pytest.raises(SetupError) as refused:
        gitsource.fetch_commit(
            RepositoryUrl(https_remote.url), CommitId("a" * 40), Subdirectory("."), dest, Watch()
        )
    assert refused.value.step == "fetch"
    assert SECRET not in refused.value.full_text()
    _assert_header_not_argv(https_remote, log)
    _assert_nothing_holds(dest)  # the scratch repository's config included


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_resolve_over_mcp_keeps_the_credential_off_every_argv(
    https_remote: Remote, argv_log: tuple[dict[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    env, log = argv_log
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    async with Client(server) as client:
        result = await client.call_tool(
            "resolve_branch", {"branch": "main", "profile": {"repository": https_remote.url}}
        )
    assert result.is_error
    assert SECRET not in result.content[0].text  # type: ignore[union-attr]
    _assert_header_not_argv(https_remote, log)
    await anyio.lowlevel.checkpoint()


def test_ssh_keeps_its_user_and_drops_a_password() -> None:
    url, header = gitsource.git_url("ssh://git:pw@example.com/org/repo.git")
    assert (url, header) == ("ssh://git@example.com/org/repo.git", None)
    assert gitsource.git_url("git@example.com:org/repo.git") == (
        "git@example.com:org/repo.git",
        None,
    )
    url, header = gitsource.git_url("https://tok%40en@example.com/r.git?ref=x")
    assert url == "https://example.com/r.git?ref=x"
    assert header == "Authorization: Basic " + base64.b64encode(b"tok@en:").decode()


def test_the_header_form_is_redacted_too() -> None:
    _url, header = gitsource.git_url(f"https://{USER}:{SECRET}@example.com/r.git")
    assert header is not None
    shown = redact_text(f"error: sent {header} to the server")
    assert shown == "error: sent Authorization: Basic *** to the server"
