"""Fixtures of the private-repository tests: a real sshd and a real HTTPS git server on
127.0.0.1, a misbehaving TCP server and the test's own client side (support/remotes.py).

Each starts in a few hundredths of a second, so each test gets its own, stopped at teardown
(also on failure). A missing daemon skips the test, except where AUTOML_REQUIRE_REMOTES=1 (CI):
there it fails it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.remotes import (
    ClientHome,
    HttpsGitServer,
    PrivateEngine,
    SshServer,
    StallingServer,
    Tls,
    make_tls,
    missing_programs,
    private_engine,
)

REQUIRE_ENV = "AUTOML_REQUIRE_REMOTES"


def require(*programs: str) -> None:
    """Skip the test when a program is missing; fail it instead where AUTOML_REQUIRE_REMOTES=1."""
    missing = missing_programs(*programs)
    if not missing:
        return
    message = (
        f"missing {', '.join(missing)} for the test git servers "
        "(Debian: apt-get install openssh-server nginx-light fcgiwrap openssl)"
    )
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def tls(tmp_path: Path) -> Tls:
    """A private CA and a server certificate for 127.0.0.1 and localhost. Another call of
    make_tls gives a different CA (an untrusted one)."""
    require("openssl")
    return make_tls(tmp_path / "tls")


@pytest.fixture
def ssh_server(tmp_path: Path) -> Iterator[SshServer]:
    """sshd on a free loopback port, key logins of the current user only; no key authorized
    yet (`authorize`)."""
    require("sshd", "ssh", "ssh-keygen")
    server = SshServer(tmp_path / "sshd")
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def https_server(tmp_path: Path, tls: Tls) -> Iterator[HttpsGitServer]:
    """git over https://127.0.0.1:PORT/git/NAME with Basic auth (`user`/`token`; `blocked` gets
    403); serve a bare repository with `publish`."""
    require("nginx", "fcgiwrap", "git-http-backend")
    server = HttpsGitServer(tmp_path / "https", tls)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def client_home(tmp_path: Path) -> Iterator[ClientHome]:
    """The test's own client: a HOME with a fresh key (`key`) and an unauthorized one
    (`spare_key`), empty known_hosts and git configuration; run processes with `env()`."""
    require("ssh", "ssh-keygen")
    client = ClientHome(tmp_path / "client", spare_key=True)
    try:
        yield client
    finally:
        client.stop()


@pytest.fixture
def stalling_server() -> Iterator[Callable[..., StallingServer]]:
    """Start misbehaving TCP servers: `stalling_server("silent")`, `("cut", upstream=(host,
    port), cut_after=N)`, `("throttle", upstream=..., chunk=K, interval=S)`."""
    started: list[StallingServer] = []

    def start(mode: str = "silent", **options: Any) -> StallingServer:
        server = StallingServer(mode, **options)
        started.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def ssh_engine(tmp_path: Path, ssh_server: SshServer, client_home: ClientHome) -> PrivateEngine:
    """The private engine and its dependency over ssh: the client's key authorized, the
    server's host key in its known_hosts."""
    ssh_server.authorize(client_home.public_key())
    client_home.trust_host(ssh_server.host_key_line())
    return private_engine(
        tmp_path / "served", client_home, lambda bare, _name: ssh_server.url(bare)
    )


@pytest.fixture
def https_engine(
    tmp_path: Path, https_server: HttpsGitServer, client_home: ClientHome, tls: Tls
) -> PrivateEngine:
    """The private engine and its dependency over https: the token in the client's credential
    helper (git-credential-store), the test CA in its http.sslCAInfo."""
    client_home.credential_store(https_server.credential_url())
    client_home.trust_ca(tls.ca_cert)
    return private_engine(
        tmp_path / "served", client_home, lambda bare, name: https_server.publish(bare, name)
    )
