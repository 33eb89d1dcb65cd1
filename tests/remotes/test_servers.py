"""The test git servers themselves, driven by plain git as a user runs it (no terminal, no
prompts): what works with the right key, host key, password and CA, and the failure each
missing piece gives. The fixtures' promises the private-repository tests rely on."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.remotes import (
    LOOPBACK,
    ClientHome,
    HttpsGitServer,
    SshServer,
    StallingServer,
    Tls,
    make_bare_repo,
    make_tls,
    run_client,
)

from mcp_server.source.sourcerepo import SourceRepository


def ssh_ready(ssh_server: SshServer, client_home: ClientHome, tmp_path: Path) -> tuple[str, str]:
    """A repository on the ssh server, the client's key authorized: its URL and commit."""
    sha = make_bare_repo(tmp_path / "served" / "engine.git")
    ssh_server.authorize(client_home.public_key())
    return ssh_server.url(tmp_path / "served" / "engine.git"), sha


def test_ssh_ls_remote_with_key(
    ssh_server: SshServer, client_home: ClientHome, tmp_path: Path
) -> None:
    """The client's own key and known_hosts (through its ssh config) log in to the server."""
    url, sha = ssh_ready(ssh_server, client_home, tmp_path)
    client_home.trust_host(ssh_server.host_key_line())
    proc = run_client(["git", "ls-remote", url], client_home.env())
    assert proc.returncode == 0, proc.stderr
    assert f"{sha}\trefs/heads/main" in proc.stdout
    assert "Accepted publickey" in ssh_server.log_text()


def test_ssh_unknown_host_fails(
    ssh_server: SshServer, client_home: ClientHome, tmp_path: Path
) -> None:
    """Without the host in known_hosts and without a terminal, ssh refuses and git fails at
    once (nothing waits for an answer)."""
    url, _ = ssh_ready(ssh_server, client_home, tmp_path)
    proc = run_client(["git", "ls-remote", url], client_home.env(), timeout=10)
    assert proc.returncode != 0
    assert "Host key verification failed" in proc.stderr
    assert client_home.known_hosts.read_text() == ""


def test_ssh_spare_key_is_refused(
    ssh_server: SshServer, client_home: ClientHome, tmp_path: Path
) -> None:
    """A key the server does not know is refused (the only key the client's config names)."""
    url, _ = ssh_ready(ssh_server, client_home, tmp_path)
    client_home.trust_host(ssh_server.host_key_line())
    client_home.ssh_config(f"Host *\n    IdentityFile {client_home.spare_key}\n")
    proc = run_client(["git", "ls-remote", url], client_home.env())
    assert proc.returncode != 0
    assert "Permission denied (publickey)" in proc.stderr


def test_ssh_agent_key_logs_in(
    ssh_server: SshServer, client_home: ClientHome, tmp_path: Path
) -> None:
    """The client's ssh-agent offers the authorized key when the configured key file is
    another one (and the agent is stopped at teardown)."""
    url, sha = ssh_ready(ssh_server, client_home, tmp_path)
    client_home.trust_host(ssh_server.host_key_line())
    client_home.ssh_config(f"Host *\n    IdentityFile {client_home.spare_key}\n")
    proc = run_client(["git", "ls-remote", url], client_home.start_agent())
    assert proc.returncode == 0, proc.stderr
    assert sha in proc.stdout


def publish_engine(https_server: HttpsGitServer, tmp_path: Path) -> tuple[str, str]:
    """The reference engine's `main`, served over https: its URL and commit."""
    repo = SourceRepository(tmp_path / "source")
    sha = repo.commit_engine("main", marker="https-1")
    return https_server.publish(repo.bare, "engine.git"), sha


def test_https_ls_remote_and_partial_fetch(
    https_server: HttpsGitServer, client_home: ClientHome, tls: Tls, tmp_path: Path
) -> None:
    """With the token in git's credential store and the CA trusted, smart HTTP serves refs and
    a shallow, blob-less fetch of an exact commit (as automl-setup fetches)."""
    url, sha = publish_engine(https_server, tmp_path)
    client_home.credential_store(https_server.credential_url())
    client_home.trust_ca(tls.ca_cert)
    env = client_home.env()
    proc = run_client(["git", "ls-remote", url], env)
    assert proc.returncode == 0, proc.stderr
    assert f"{sha}\trefs/heads/main" in proc.stdout
    work = tmp_path / "work"
    run_client(["git", "init", "-q", str(work)], env)
    run_client(["git", "remote", "add", "origin", url], env, cwd=work)
    fetch = ["git", "fetch", "--depth=1", "--filter=blob:none", "origin", sha]
    proc = run_client(fetch, env, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert run_client(["git", "cat-file", "-t", sha], env, cwd=work).stdout.strip() == "commit"
    assert f"{https_server.user} " in https_server.access_log_text()
    assert '"POST /git/engine.git/git-upload-pack HTTP/1.1" 200' in https_server.access_log_text()


def test_https_wrong_password_fails(
    https_server: HttpsGitServer, client_home: ClientHome, tls: Tls, tmp_path: Path
) -> None:
    """A wrong token in the store: 401, and git gives up without prompting."""
    url, _ = publish_engine(https_server, tmp_path)
    client_home.credential_store(https_server.credential_url(password="not-the-token"))
    client_home.trust_ca(tls.ca_cert)
    proc = run_client(["git", "ls-remote", url], client_home.env())
    assert proc.returncode != 0
    assert "Authentication failed" in proc.stderr


def test_https_blocked_user_gets_403(
    https_server: HttpsGitServer, client_home: ClientHome, tls: Tls, tmp_path: Path
) -> None:
    """User `blocked` logs in with a valid password and is refused: 403."""
    url, _ = publish_engine(https_server, tmp_path)
    client_home.credential_store(https_server.credential_url("blocked"))
    client_home.trust_ca(tls.ca_cert)
    proc = run_client(["git", "ls-remote", url], client_home.env())
    assert proc.returncode != 0
    assert "The requested URL returned error: 403" in proc.stderr


def test_https_untrusted_ca_fails(
    https_server: HttpsGitServer, client_home: ClientHome, tmp_path: Path
) -> None:
    """Trusting another CA than the server's: git fails on the certificate, before any
    request (the access log stays empty)."""
    url, _ = publish_engine(https_server, tmp_path)
    client_home.credential_store(https_server.credential_url())
    client_home.trust_ca(make_tls(tmp_path / "other-ca").ca_cert)
    proc = run_client(["git", "ls-remote", url], client_home.env())
    assert proc.returncode != 0
    assert "server certificate verification failed" in proc.stderr
    assert "/git/engine.git" not in https_server.access_log_text()


def test_silent_server_hangs_git(
    stalling_server: Callable[..., StallingServer], client_home: ClientHome
) -> None:
    """A server that accepts and never answers keeps git waiting (only a timeout ends it)."""
    silent = stalling_server("silent")
    url = f"https://{LOOPBACK}:{silent.port}/git/engine.git"
    with pytest.raises(subprocess.TimeoutExpired):
        run_client(["git", "ls-remote", url], client_home.env(), timeout=1.5)
    assert silent.connections == 1


def test_cut_proxy_holds_after_the_limit(
    stalling_server: Callable[..., StallingServer], https_server: HttpsGitServer, tls: Tls
) -> None:
    """After `cut_after` bytes from upstream nothing more passes and nothing is closed: the
    TLS handshake through it times out instead of failing."""
    cut = stalling_server("cut", upstream=(LOOPBACK, https_server.port), cut_after=100)
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    with (
        socket.create_connection((LOOPBACK, cut.port), timeout=1) as raw,
        pytest.raises(TimeoutError),
    ):
        context.wrap_socket(raw, server_hostname=LOOPBACK)
    assert cut.bytes_down == 100
    assert cut.bytes_up > 0


def test_throttle_delivers_everything_slowly(
    stalling_server: Callable[..., StallingServer],
    https_server: HttpsGitServer,
    client_home: ClientHome,
    tls: Tls,
    tmp_path: Path,
) -> None:
    """Through a throttling proxy a clone still gets every byte, at the throttled pace."""
    blob = os.urandom(48 * 1024).hex()  # incompressible: the pack is about this big
    make_bare_repo(tmp_path / "served" / "big.git", {"blob.txt": blob})
    https_server.publish(tmp_path / "served" / "big.git", "big.git")
    chunk, interval = 16 * 1024, 0.1
    slow = stalling_server(
        "throttle", upstream=(LOOPBACK, https_server.port), chunk=chunk, interval=interval
    )
    client_home.credential_store(https_server.credential_url(port=slow.port))
    client_home.trust_ca(tls.ca_cert)
    started = time.monotonic()
    clone = ["git", "clone", "-q", https_server.url("big.git", port=slow.port), "big"]
    proc = run_client(clone, client_home.env(), cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "big" / "blob.txt").read_text() == blob
    assert slow.bytes_down > len(blob) // 2  # the pack compresses hex to about its bytes
    assert elapsed >= (slow.bytes_down // chunk - 1) * interval
