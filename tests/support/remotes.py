"""Real git servers on 127.0.0.1 for tests of private repositories: OpenSSH's sshd, git's smart
HTTP behind nginx with TLS and Basic auth, a misbehaving TCP listener, and a client side (home,
keys, known_hosts, git configuration) of the test's own.

Everything lives in the test's temporary folder, listens on a free loopback port and is stopped
by `stop()` (the fixtures call it, also on failure). Nothing here reads or writes the real user's
~/.ssh or ~/.gitconfig, or touches a system service: the servers are private processes.
"""

from __future__ import annotations

import contextlib
import getpass
import http.client
import os
import pty
import re
import secrets
import select
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from support.cli import CliResult, run_cli

from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
GIT_HTTP_BACKEND = Path("/usr/lib/git-core/git-http-backend")
# Daemons live in sbin, which a non-root PATH often lacks.
_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"]
)
# Inherited variables that would make git or ssh ignore the client's own files (this machine
# sets GIT_SSL_CAINFO, which beats http.sslCAInfo), use the developer's agent, or prompt on
# the developer's desktop.
_CLIENT_DROPPED = ("SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_ASKPASS", "DISPLAY", "WAYLAND_DISPLAY")


def find_program(name: str) -> str | None:
    """`name` on PATH or in the sbin folders (sshd, nginx, fcgiwrap live there)."""
    return shutil.which(name, path=_SEARCH_PATH)


def missing_programs(*names: str) -> list[str]:
    """The programs of `names` this machine lacks (git-http-backend by its path)."""
    missing = [name for name in names if name != "git-http-backend" and not find_program(name)]
    if "git-http-backend" in names and not os.access(GIT_HTTP_BACKEND, os.X_OK):
        missing.append(str(GIT_HTTP_BACKEND))
    return missing


def free_port() -> int:
    """A loopback port free right now (a daemon binds it itself; `start` retries on a race)."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def short_dir(prefix: str) -> Path:
    """A fresh folder with a short path: unix socket paths must stay under 108 bytes, and
    pytest's temporary folders can be longer."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def run(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """A helper command that must succeed; its stderr in the error when it does not."""
    proc = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        timeout=60, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def run_client(
    argv: list[str], env: dict[str, str], *, cwd: Path | None = None, timeout: float = 20.0
) -> subprocess.CompletedProcess[str]:
    """`argv` as a user's git (or uv) runs without a terminal: English messages, no prompts,
    stdin closed, its own session. On timeout its whole group is killed and TimeoutExpired
    raised."""
    full = {**env, "LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0"}
    with subprocess.Popen(
        argv, cwd=cwd, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    ) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


# --------------------------------------------------------------------------------------------
# Processes


def _children(pid: int) -> list[int]:
    """Every live descendant of `pid` (sshd's per-connection children leave its session, so
    a process group alone misses them)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM to a daemon started in its own session, its group and all its descendants;
    SIGKILL to whatever is still there after STOP_TIMEOUT_S."""
    if proc is None:
        return
    pids = _children(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    _signal([proc.pid, *pids], signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_TIMEOUT_S)
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    _signal([pid for pid in [proc.pid, *pids] if _alive(pid)], signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_TIMEOUT_S)


def _daemon(
    argv: list[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A daemon in its own session (stop_process ends its whole group), output to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


_S = TypeVar("_S", bound="_Server")


class _Server:
    """start/stop and the context manager shared by the servers."""

    def start(self) -> _Server:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# TLS


@dataclass(frozen=True)
class Tls:
    """A private CA and a server certificate it signed, for 127.0.0.1 and localhost."""

    ca_cert: Path
    cert: Path
    key: Path


def make_tls(tmp: Path) -> Tls:
    """A fresh CA (each call a different one: an untrusted CA is just another call) and a
    server key and certificate signed by it, made with the openssl CLI."""
    tmp.mkdir(parents=True, exist_ok=True)
    tag = secrets.token_hex(4)
    # Own configuration files: the system's openssl.cnf adds extensions of its own.
    (tmp / "ca.cnf").write_text(
        "[req]\ndistinguished_name = dn\nprompt = no\nx509_extensions = ext\n"
        f"[dn]\nCN = automl-setup test CA {tag}\n"
        "[ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
        "subjectKeyIdentifier = hash\n"
    )
    (tmp / "server.cnf").write_text(
        "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = 127.0.0.1\n"
    )
    (tmp / "server.ext").write_text(
        "basicConstraints = critical,CA:FALSE\n"
        "keyUsage = critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1,DNS:localhost\n"
        "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n"
    )
    ca_key, ca_cert = tmp / "ca.key", tmp / "ca.crt"
    key, csr, cert = tmp / "server.key", tmp / "server.csr", tmp / "server.crt"
    ec = ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
    env = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
    run("openssl", "genpkey", *ec, "-out", str(ca_key), env=env)
    run("openssl", "req", "-config", str(tmp / "ca.cnf"), "-x509", "-new", "-key", str(ca_key),
        "-sha256", "-days", "7", "-out", str(ca_cert), env=env)  # fmt: skip
    run("openssl", "genpkey", *ec, "-out", str(key), env=env)
    run("openssl", "req", "-config", str(tmp / "server.cnf"), "-new", "-key", str(key),
        "-out", str(csr), env=env)  # fmt: skip
    run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
        "-set_serial", f"0x{secrets.token_hex(8)}", "-days", "7", "-sha256",
        "-extfile", str(tmp / "server.ext"), "-out", str(cert), env=env)  # fmt: skip
    return Tls(ca_cert=ca_cert, cert=cert, key=key)


# --------------------------------------------------------------------------------------------
# Repositories


def make_bare_repo(path: Path, files: dict[str, str] | None = None) -> str:
    """A bare repository at `path` with one commit on `main` (partial clone and any-commit
    fetches allowed, as on the big hosts); returns the commit."""
    work = path.with_name(path.name.removesuffix(".git") + "-work")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"]
    run("git", "init", "-q", "--bare", "-b", "main", str(path))
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        run("git", "config", key, "true", cwd=path)
    run("git", "init", "-q", "-b", "main", str(work))
    for rel, text in (files or {"README.md": "test repository\n"}).items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    run("git", "add", "-A", cwd=work)
    run(*git, "commit", "-q", "-m", "first", cwd=work)
    run("git", "push", "-q", str(path), "main", cwd=work)
    return run("git", "rev-parse", "HEAD", cwd=work).strip()


# --------------------------------------------------------------------------------------------
# sshd


class SshServer(_Server):
    """OpenSSH's sshd on 127.0.0.1, key logins only, for the current user (root included):
    its own host key, authorized_keys, pid file and log in `root`, never the system's."""

    def __init__(self, root: Path, user: str | None = None) -> None:
        self.root = root
        self.user = user or getpass.getuser()
        self.port = 0
        self.host_key = root / "ssh_host_ed25519_key"
        self.authorized_keys = root / "authorized_keys"
        self.config = root / "sshd_config"
        self.log = root / "sshd.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SshServer:
        sshd = find_program("sshd")
        if sshd is None:
            raise RuntimeError("no sshd (Debian: openssh-server)")
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.host_key.exists():
            run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test-host",
                "-f", str(self.host_key))  # fmt: skip
        self.authorized_keys.touch()
        if os.geteuid() == 0:  # the privilege separation folder the Debian service would make
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        for _ in range(3):  # another process may take the free port first
            self.port = free_port()
            self._write_config()
            self.log.write_bytes(b"")
            # An absolute path: sshd re-executes itself for every connection.
            self._proc = _daemon(
                [str(Path(sshd).resolve()), "-D", "-e", "-f", str(self.config)], self.log
            )
            if self._wait_ready():
                return self
            stop_process(self._proc)
            self._proc = None
            if "Address already in use" not in self.log_text():
                break
        raise RuntimeError(f"sshd did not start on port {self.port}:\n{self.log_text()}")

    def _write_config(self) -> None:
        self.config.write_text(
            f"Port {self.port}\nListenAddress {LOOPBACK}\n"
            f"HostKey {self.host_key}\nPidFile {self.root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.authorized_keys}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\n"
            "StrictModes no\nUsePAM no\n"
            "AllowAgentForwarding no\nAllowTcpForwarding no\nX11Forwarding no\n"
            "PermitTunnel no\nPrintMotd no\n"
            # git asks for protocol v2 through this variable, as GitHub accepts it.
            "AcceptEnv GIT_PROTOCOL\n"
            "LogLevel VERBOSE\n"
        )

    def _wait_ready(self) -> bool:
        """sshd says it listens (no probe connection that would show in its log)."""
        assert self._proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if f"Server listening on {LOOPBACK} port {self.port}" in self.log_text():
                return True
            if self._proc.poll() is not None:
                return False
            time.sleep(0.01)
        return False

    def stop(self) -> None:
        """sshd and every session it started."""
        stop_process(self._proc)
        self._proc = None

    def host_key_line(self, port: int | None = None) -> str:
        """The known_hosts line for this server (on `port`: a proxy in front of it)."""
        kind, blob = (self.root / "ssh_host_ed25519_key.pub").read_text().split()[:2]
        return f"[{LOOPBACK}]:{port or self.port} {kind} {blob}"

    def authorize(self, pubkey_text: str) -> None:
        """Let the key of this public key line log in."""
        with self.authorized_keys.open("a") as out:
            out.write(pubkey_text.strip() + "\n")

    def url(self, repo: Path, port: int | None = None) -> str:
        """ssh://USER@127.0.0.1:PORT/abs/path/to/repo.git"""
        return f"ssh://{self.user}@{LOOPBACK}:{port or self.port}{repo.resolve()}"

    def log_text(self) -> str:
        return _read(self.log)


# --------------------------------------------------------------------------------------------
# HTTPS: nginx + fcgiwrap + git-http-backend

# git-http-backend behind a gate: nginx has already checked the password, and this answers
# 403 to the authenticated user `blocked` (authorization after authentication, as a host does).
_CGI = """#!/bin/sh
if [ "$REMOTE_USER" = blocked ]; then
    printf 'Status: 403 Forbidden\\r\\nContent-Type: text/plain\\r\\n\\r\\nforbidden\\n'
    exit 0
fi
exec {backend}
"""


class HttpsGitServer(_Server):
    """git's smart HTTP at https://127.0.0.1:PORT/git/NAME: nginx (TLS from `tls`, Basic auth)
    in front of fcgiwrap running git-http-backend over `repos`. Users: `user`/`token`, and
    `blocked`/`blocked_token`, a valid login that gets 403."""

    def __init__(self, root: Path, tls: Tls, user: str = "deploy") -> None:
        self.root = root
        self.tls = tls
        self.repos = root / "repos"
        self.user = user
        self.token = secrets.token_hex(20)
        self.blocked_token = secrets.token_hex(20)
        self.port = 0
        self.error_log = root / "error.log"
        self.access_log = root / "access.log"
        self._sockets: Path | None = None
        self._nginx: subprocess.Popen[bytes] | None = None
        self._fcgiwrap: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpsGitServer:
        nginx, fcgiwrap = find_program("nginx"), find_program("fcgiwrap")
        if nginx is None or fcgiwrap is None:
            raise RuntimeError("no nginx or fcgiwrap (Debian: nginx-light fcgiwrap)")
        for folder in ("repos", "temp", "home"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        (self.root / "htpasswd").write_text(
            f"{self.user}:{{PLAIN}}{self.token}\nblocked:{{PLAIN}}{self.blocked_token}\n"
        )
        cgi = self.root / "git-cgi.sh"
        cgi.write_text(_CGI.format(backend=GIT_HTTP_BACKEND))
        cgi.chmod(0o755)
        self._sockets = short_dir("amr-https-")
        sock = self._sockets / "fcgiwrap.sock"
        self._fcgiwrap = _daemon(
            [fcgiwrap, "-c", "4", "-s", f"unix:{sock}"], self.root / "fcgiwrap.log"
        )
        self._wait_socket(sock)
        for _ in range(3):  # another process may take the free port first
            self.port = free_port()
            conf = self._write_config(sock, cgi)
            self.error_log.write_bytes(b"")
            argv = [nginx, "-p", str(self.root), "-e", str(self.error_log), "-c", str(conf)]
            self._nginx = _daemon(argv, self.root / "nginx.out")
            if self._wait_ready():
                return self
            stop_process(self._nginx)
            self._nginx = None
            if "Address already in use" not in self.error_log_text():
                break
        log = self.error_log_text() + _read(self.root / "nginx.out")
        self.stop()
        raise RuntimeError(f"nginx did not start on port {self.port}:\n{log}")

    def _write_config(self, sock: Path, cgi: Path) -> Path:
        temp, home = self.root / "temp", self.root / "home"
        # Root's workers would run as nobody, who cannot reach fcgiwrap's socket or the files.
        user = "user root;\n" if os.geteuid() == 0 else ""
        params = {
            "SCRIPT_FILENAME": str(cgi),
            "PATH_INFO": "$1",
            "QUERY_STRING": "$query_string",
            "REQUEST_METHOD": "$request_method",
            "CONTENT_TYPE": "$content_type",
            "CONTENT_LENGTH": "$content_length",
            "REMOTE_USER": "$remote_user",
            "REMOTE_ADDR": "$remote_addr",
            "SERVER_PROTOCOL": "$server_protocol",
            "GIT_PROTOCOL": "$http_git_protocol",
            "GIT_PROJECT_ROOT": str(self.repos),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            # The server's git reads no user's or system's configuration; safe.directory in
            # case the repositories' owner is not the server's user.
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
        }
        fastcgi = "".join(f'            fastcgi_param {k} "{v}";\n' for k, v in params.items())
        conf = self.root / "nginx.conf"
        conf.write_text(
            f"{user}daemon off;\nworker_processes 1;\npid {self.root / 'nginx.pid'};\n"
            f"error_log {self.error_log} info;\n"
            "events { worker_connections 256; }\n"
            "http {\n"
            f"    access_log {self.access_log};\n"
            f"    client_body_temp_path {temp / 'body'};\n"
            f"    fastcgi_temp_path {temp / 'fastcgi'};\n"
            f"    proxy_temp_path {temp / 'proxy'};\n"
            f"    scgi_temp_path {temp / 'scgi'};\n"
            f"    uwsgi_temp_path {temp / 'uwsgi'};\n"
            "    client_max_body_size 0;\n"
            "    server {\n"
            f"        listen {LOOPBACK}:{self.port} ssl;\n"
            "        server_name localhost;\n"
            f"        ssl_certificate {self.tls.cert};\n"
            f"        ssl_certificate_key {self.tls.key};\n"
            "        location ~ ^/git(/.*)$ {\n"
            '            auth_basic "automl-setup test git";\n'
            f"            auth_basic_user_file {self.root / 'htpasswd'};\n"
            f"            fastcgi_pass unix:{sock};\n"
            f"{fastcgi}"
            "        }\n"
            "    }\n"
            "}\n"
        )
        return conf

    def _wait_socket(self, sock: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._fcgiwrap is not None and self._fcgiwrap.poll() is not None:
                break
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(sock))
                return
            time.sleep(0.01)
        log = _read(self.root / "fcgiwrap.log")
        self.stop()
        raise RuntimeError(f"fcgiwrap did not listen on {sock}:\n{log}")

    def _wait_ready(self) -> bool:
        """A real request answered (401 without credentials): the workers are up."""
        assert self._nginx is not None
        context = ssl.create_default_context(cafile=str(self.tls.ca_cert))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._nginx.poll() is not None:
                return False
            conn = http.client.HTTPSConnection(LOOPBACK, self.port, context=context, timeout=2)
            try:
                conn.request("GET", "/git/")
                if conn.getresponse().status == 401:
                    return True
            except OSError:
                time.sleep(0.01)
            finally:
                conn.close()
        return False

    def stop(self) -> None:
        stop_process(self._nginx)
        stop_process(self._fcgiwrap)
        self._nginx = self._fcgiwrap = None
        if self._sockets is not None:
            shutil.rmtree(self._sockets, ignore_errors=True)
            self._sockets = None

    def url(self, name: str, port: int | None = None) -> str:
        """https://127.0.0.1:PORT/git/NAME (on `port`: a proxy in front of it)."""
        return f"https://{LOOPBACK}:{port or self.port}/git/{name}"

    def credential_url(
        self, user: str | None = None, password: str | None = None, port: int | None = None
    ) -> str:
        """https://USER:PASSWORD@127.0.0.1:PORT, a line of git-credential-store's file (the
        user's own password unless given; `port`: a proxy's, which the store matches)."""
        user = user or self.user
        if password is None:
            password = self.blocked_token if user == "blocked" else self.token
        return f"https://{user}:{password}@{LOOPBACK}:{port or self.port}"

    def publish(self, bare: Path, name: str) -> str:
        """Serve the bare repository `bare` (a SourceRepository's origin.git, say) as `name`;
        its URL."""
        (self.repos / name).parent.mkdir(parents=True, exist_ok=True)
        (self.repos / name).symlink_to(bare.resolve(), target_is_directory=True)
        return self.url(name)

    def error_log_text(self) -> str:
        return _read(self.error_log)

    def access_log_text(self) -> str:
        return _read(self.access_log)


# --------------------------------------------------------------------------------------------
# The client side


class ClientHome:
    """One test's client: a HOME with .ssh (a fresh key, known_hosts, config), a global git
    configuration, and `env()` to run git, ssh, uv or automl-setup with.

    OpenSSH takes ~ from the password database, not from $HOME: with HOME alone it would still
    read the real ~/.ssh. So `env()` puts a `ssh` wrapper first on PATH that runs the real ssh
    with `-F HOME/.ssh/config`, and that config names this home's known_hosts and keys (then
    includes /etc/ssh/ssh_config, which ssh would read anyway). git, uv, and a GIT_SSH_COMMAND of
    plain `ssh ...` all find the wrapper."""

    def __init__(self, root: Path, *, key: bool = True, spare_key: bool = False) -> None:
        self.root = root
        self.home = root / "home"
        self.ssh_dir = self.home / ".ssh"
        self.ssh_dir.mkdir(parents=True, mode=0o700)
        self.known_hosts = self.ssh_dir / "known_hosts"
        self.known_hosts.touch()
        self.ssh_config_file = self.ssh_dir / "config"
        self.gitconfig = self.home / ".gitconfig"
        self.gitconfig.touch()
        self.key = self.ssh_dir / "id_ed25519"
        self.spare_key = self.ssh_dir / "id_spare"  # never authorized anywhere
        if key:
            run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test-client",
                "-f", str(self.key))  # fmt: skip
        if spare_key:
            run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test-spare",
                "-f", str(self.spare_key))  # fmt: skip
        self.bin = root / "bin"
        self.bin.mkdir()
        real_ssh = find_program("ssh") or "/usr/bin/ssh"
        wrapper = self.bin / "ssh"
        wrapper.write_text(
            "#!/bin/sh\n# ssh reads ~/.ssh from the password database, not $HOME.\n"
            f'exec {shlex.quote(real_ssh)} -F {shlex.quote(str(self.ssh_config_file))} "$@"\n'
        )
        wrapper.chmod(0o755)
        self._user_config = ""
        self._write_ssh_config()
        self._agents: list[subprocess.Popen[bytes]] = []
        self._agent_dirs: list[Path] = []

    def public_key(self, key: Path | None = None) -> str:
        """The public key line of `key` (the main key by default)."""
        return Path(f"{key or self.key}.pub").read_text().strip()

    def _write_ssh_config(self) -> None:
        lines = [f"    UserKnownHostsFile {self.known_hosts}", "    GlobalKnownHostsFile /dev/null"]
        # As ssh does: its default key unless the user's configuration names one. Without any
        # key here, ssh's own defaults stand (they only find files under the passwd home).
        if self.key.exists() and not re.search(r"(?im)^\s*IdentityFile\b", self._user_config):
            lines.append(f"    IdentityFile {self.key}")
        system = Path("/etc/ssh/ssh_config")
        if system.exists():
            lines.append(f"    Include {system}")
        self.ssh_config_file.write_text(
            f"{self._user_config.rstrip()}\n\n# ClientHome: for ~/.ssh\nHost *\n"
            + "\n".join(lines)
            + "\n"
        )
        self.ssh_config_file.chmod(0o600)

    def ssh_config(self, text: str) -> None:
        """The user's own ssh configuration (~/.ssh/config), e.g. Host blocks."""
        self._user_config = text
        self._write_ssh_config()

    def trust_host(self, line: str) -> None:
        """Add a known_hosts line (SshServer.host_key_line())."""
        with self.known_hosts.open("a") as out:
            out.write(line.strip() + "\n")

    def git_config(self, key: str, value: str) -> None:
        """Set `key` in this client's global git configuration."""
        run("git", "config", "--file", str(self.gitconfig), key, value)

    def credential_store(self, url_with_user_and_token: str) -> Path:
        """git's `store` credential helper with this one line in its file (git-credential-store
        format: https://user:password@host:port)."""
        store = self.home / ".git-credentials"
        store.write_text(url_with_user_and_token.strip() + "\n")
        store.chmod(0o600)
        self.git_config("credential.helper", f"store --file {shlex.quote(str(store))}")
        return store

    def trust_ca(self, ca_cert: Path) -> None:
        """git trusts this CA for https (http.sslCAInfo; it replaces the system's bundle)."""
        self.git_config("http.sslCAInfo", str(ca_cert))

    def env(self) -> dict[str, str]:
        """The whole environment of a client process: this home, this git configuration only,
        the ssh wrapper first on PATH; no agent, no inherited GIT_* variable."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in _CLIENT_DROPPED and not k.startswith("GIT_")
        }
        env.update(
            HOME=str(self.home),
            GIT_CONFIG_GLOBAL=str(self.gitconfig),
            GIT_CONFIG_NOSYSTEM="1",
            XDG_CONFIG_HOME=str(self.home / ".config"),
            PATH=os.pathsep.join([str(self.bin), os.environ.get("PATH", os.defpath)]),
        )
        return env

    def start_agent(self, key: Path | None = None) -> dict[str, str]:
        """An ssh-agent of this client holding `key` (the main key by default): `env()` with
        its SSH_AUTH_SOCK. Stopped by `stop()`."""
        agent = find_program("ssh-agent")
        if agent is None:
            raise RuntimeError("no ssh-agent (Debian: openssh-client)")
        folder = short_dir("amr-agent-")
        self._agent_dirs.append(folder)
        sock = folder / "agent.sock"
        # -D: in the foreground, so stop() can end it by its process.
        log = self.root / f"agent-{len(self._agents)}.log"
        proc = _daemon([agent, "-D", "-a", str(sock)], log)
        self._agents.append(proc)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ssh-agent did not start: {_read(log)}")
            time.sleep(0.01)
        env = {**self.env(), "SSH_AUTH_SOCK": str(sock)}
        run("ssh-add", "-q", str(key or self.key), env=env)
        return env

    def stop(self) -> None:
        """End the agents this client started."""
        for proc in self._agents:
            stop_process(proc)
        self._agents.clear()
        for folder in self._agent_dirs:
            shutil.rmtree(folder, ignore_errors=True)
        self._agent_dirs.clear()


# --------------------------------------------------------------------------------------------
# A misbehaving TCP server

MODES = ("silent", "cut", "throttle")
POLL_S = 0.1


class StallingServer(_Server):
    """A loopback TCP listener that misbehaves on purpose, in daemon threads:

    - `silent`: accepts connections and never sends or closes anything (until stop);
    - `cut`: forwards to `upstream` both ways until `cut_after` bytes came from upstream, then
      forwards nothing more and holds both connections open;
    - `throttle`: forwards both ways, upstream to client at most `chunk` bytes every `interval`
      seconds (slow but moving).

    `bytes_up` (client to upstream) and `bytes_down` (upstream to client) count what passed.
    It stops by itself after `lifetime` seconds."""

    def __init__(
        self,
        mode: str = "silent",
        *,
        upstream: tuple[str, int] | None = None,
        cut_after: int = 0,
        chunk: int = 1024,
        interval: float = 0.1,
        lifetime: float = 180.0,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is none of {MODES}")
        if mode != "silent" and upstream is None:
            raise ValueError(f"mode {mode!r} needs an upstream")
        if upstream is not None and upstream[0] not in (LOOPBACK, "localhost"):
            raise ValueError("the upstream must be on the loopback interface")
        self.mode = mode
        self.upstream = upstream
        self.cut_after = cut_after
        self.chunk = chunk
        self.interval = interval
        self.lifetime = lifetime
        self.port = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._deadline = 0.0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> StallingServer:
        listener = socket.socket()
        listener.bind((LOOPBACK, 0))  # its own port: no race
        listener.listen(32)
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        self._deadline = time.monotonic() + self.lifetime
        self._spawn(self._accept_loop)
        return self

    def _done(self) -> bool:
        return self._stop.is_set() or time.monotonic() > self._deadline

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._done():
            try:
                if not select.select([self._listener], [], [], POLL_S)[0]:
                    continue
                client, _ = self._listener.accept()
            except (OSError, ValueError):  # closed by stop()
                break
            self._keep(client)
            with self._lock:
                self.connections += 1
            if self.mode != "silent":
                self._spawn(self._forward, client)
        self._close_all()

    def _forward(self, client: socket.socket) -> None:
        assert self.upstream is not None
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        server.settimeout(None)
        self._keep(server)
        self._spawn(self._pump, client, server, False)
        self._spawn(self._pump, server, client, True)

    def _hold(self) -> None:
        """Forward nothing more, close nothing, until stop."""
        while not self._done():
            self._stop.wait(POLL_S)

    def _pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        size = self.chunk if down and self.mode == "throttle" else 65536
        while not self._done():
            if self.mode == "cut" and self.bytes_down >= self.cut_after:
                self._hold()
                return
            try:
                ready, _, _ = select.select([src], [], [], POLL_S)
                if not ready:
                    continue
                data = src.recv(size)
            except (OSError, ValueError):
                return
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            if down and self.mode == "cut":
                data = data[: self.cut_after - self.bytes_down]
            try:
                dst.sendall(data)
            except OSError:
                return
            with self._lock:
                if down:
                    self.bytes_down += len(data)
                else:
                    self.bytes_up += len(data)
            if down and self.mode == "throttle":
                self._stop.wait(self.interval)

    def _close_all(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in sendall
            sock.close()
        if self._listener is not None:
            self._listener.close()

    def stop(self) -> None:
        self._stop.set()
        self._close_all()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=STOP_TIMEOUT_S)


# --------------------------------------------------------------------------------------------
# A private engine: its repository and a private VCS dependency on one server

DEPENDENCY = "privdep"
DEPENDENCY_FILES = {
    "pyproject.toml": (
        '[project]\nname = "privdep"\nversion = "1.0"\n\n[build-system]\n'
        'requires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    ),
    "src/privdep/__init__.py": 'SECRET_FREE = "a private dependency"\n',
}
PRIVATE_BRANCH = "dev/private-dep"


@dataclass
class PrivateEngine:
    """The reference engine in a repository on a test server (`main`, and PRIVATE_BRANCH whose
    engine requires DEPENDENCY from a second repository on the same server, by commit), and
    the client that reaches them."""

    client: ClientHome
    engine: SourceRepository
    url: str  # the engine repository over the server's transport
    dependency_url: str
    dependency_commit: str

    def env(self, **extra: str) -> dict[str, str]:
        """The client's whole environment, with the machine's uv cache (nothing re-downloaded)
        and this session's wheel store."""
        cache = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")
        return {**self.client.env(), "UV_CACHE_DIR": cache, **extra}

    def profile(self, url: str | None = None) -> list[str]:
        return [
            "--repository", url or self.url, "--subdirectory", self.engine.subdirectory,
            "--distribution", REFERENCE_DISTRIBUTION,
        ]  # fmt: skip


def private_engine(
    root: Path, client: ClientHome, url_of: Callable[[Path, str], str]
) -> PrivateEngine:
    """The engine and its private dependency under `root`, served at `url_of(bare, name)`."""
    dependency = root / "privdep.git"
    commit = make_bare_repo(dependency, DEPENDENCY_FILES)
    dependency_url = url_of(dependency, "privdep.git")
    engine = SourceRepository(root / "engine")
    engine.commit_engine("main", marker="private-main")
    engine.commit_engine(
        PRIVATE_BRANCH, base="main", marker="private-dep",
        dependencies=[f"{DEPENDENCY} @ git+{dependency_url}@{commit}"],
    )  # fmt: skip
    return PrivateEngine(client, engine, url_of(engine.bare, "engine.git"), dependency_url, commit)


def install_private(
    engine: PrivateEngine,
    target: Path,
    *extra: str,
    branch: str = PRIVATE_BRANCH,
    url: str | None = None,
    env: dict[str, str] | None = None,
) -> CliResult:
    """`automl-setup install --create-env` of `branch` of the private engine, as the client."""
    return run_cli(
        "install", "--branch", branch, "--python", str(target), "--create-env",
        *engine.profile(url), *extra, env=env or engine.env(), whole_env=True,
    )  # fmt: skip


def scratch_left(tmp: Path) -> list[str]:
    """automl-setup's scratch folders left in the temporary folder `tmp` (TMPDIR of a run)."""
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("automl-setup-"))


def refusal_lines(stderr: str) -> tuple[str, str, str]:
    """The refusal's first line (`error: STEP: cause`), its remedy line and its first detail,
    after the progress lines before them."""
    lines = stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    return lines[at], lines[at + 1], lines[at + 2] if len(lines) > at + 2 else ""


def run_in_terminal(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """`argv` with a pseudo-terminal as its controlling terminal, stdin and output, as a person
    runs it: its exit status (None: still running at `timeout`, then killed) and everything it
    wrote to the terminal, a question included."""
    pid, master = pty.fork()
    if pid == 0:  # the child: the terminal is its own now
        try:
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    finished = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last user is gone
                data = b""
            if not data:
                finished = True
                break
            chunks.append(data)
        if not finished:
            os.kill(pid, signal.SIGKILL)
    finally:
        _, raw = os.waitpid(pid, 0)
        os.close(master)
    status = os.waitstatus_to_exitcode(raw) if finished else None
    return status, b"".join(chunks).decode(errors="replace")


def assert_refused_at_resolve(
    engine: PrivateEngine, url: str, tmp: Path, expected: tuple[str, str, str]
) -> None:
    """`install --create-env` from `url` is refused at resolve with `expected` (the cause, the
    transport's own line in the first detail, a piece of the remedy), and leaves nothing: no
    environment, no scratch folder."""
    scratch = tmp / "tmp"
    scratch.mkdir()
    target = tmp / "env"
    result = install_private(engine, target, url=url, env=engine.env(TMPDIR=str(scratch)))
    cause, line, remedy = expected
    assert result.code == 1, result.output
    first, remedy_line, said = refusal_lines(result.stderr)
    assert first.startswith("error: resolve: ") and cause in first, result.stderr
    assert remedy in remedy_line, result.stderr
    assert said.startswith(("  - ssh said: ", "  - git said: ")) and line in said, result.stderr
    assert "Could not read from remote repository" not in first
    for off in ("sslverify", "stricthostkeychecking=no", "accept-new"):
        assert off not in remedy_line.lower()
    assert not target.exists()
    assert scratch_left(scratch) == []
