"""Private engine repositories over ssh, against a real sshd: the user's own key, ssh config,
agent and ssh command are used as they are (for git and for the git uv starts for a private
dependency), and every failure names ssh's own reason and the remedy, changing nothing."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from support.cli import run_cli
from support.engines import engine_marker
from support.remotes import (
    DEPENDENCY,
    ClientHome,
    PrivateEngine,
    SshServer,
    assert_refused_at_resolve,
    free_port,
    install_private,
)


def _spare_only(engine: PrivateEngine, server: SshServer) -> ClientHome:
    """Only the client's spare key is authorized: ssh's default key (the one its config
    names) is refused, so whatever reaches the server used the key the user chose."""
    client = engine.client
    server.authorized_keys.write_text(client.public_key(client.spare_key) + "\n")
    return client


def _resolve(engine: PrivateEngine, env: dict[str, str], url: str | None = None) -> tuple:
    result = run_cli(
        "resolve", "--branch", "main", *engine.profile(url), "--json", env=env, whole_env=True
    )
    return result.code, result


@pytest.mark.slow
def test_install_over_ssh_records_the_private_dependency_by_commit(
    ssh_engine: PrivateEngine, tmp_path: Path
) -> None:
    target = tmp_path / "env"
    result = install_private(ssh_engine, target, "--json")
    assert result.code == 0, result.output
    record = json.loads(result.stdout)["record"]
    assert record["source"]["repository"] == ssh_engine.url
    member = record["closure"][DEPENDENCY]
    assert member["direct_url"]["kind"] == "vcs"
    assert member["direct_url"]["commit_id"] == ssh_engine.dependency_commit
    # uv writes the ssh URL without its user into direct_url.json; the record keeps it so.
    assert member["direct_url"]["url"] == ssh_engine.dependency_url.replace("root@", "")
    assert engine_marker(target) == "private-dep"
    verify = run_cli("verify", "--python", str(target), *ssh_engine.profile(),
                     env=ssh_engine.env(), whole_env=True)  # fmt: skip
    assert verify.code == 0, verify.output


def test_the_users_core_sshcommand_chooses_the_key(
    ssh_engine: PrivateEngine, ssh_server: SshServer
) -> None:
    client = _spare_only(ssh_engine, ssh_server)
    env = ssh_engine.env()
    code, refused = _resolve(ssh_engine, env)
    assert code == 1 and "refused every ssh key offered" in refused.stderr, refused.output
    command = f"ssh -i {shlex.quote(str(client.spare_key))} -o IdentitiesOnly=yes"
    client.git_config("core.sshCommand", command)
    code, result = _resolve(ssh_engine, env)
    assert code == 0, result.output
    assert json.loads(result.stdout)["commit"] == ssh_engine.engine.head("main")


def test_the_users_git_ssh_command_chooses_the_key(
    ssh_engine: PrivateEngine, ssh_server: SshServer
) -> None:
    client = _spare_only(ssh_engine, ssh_server)
    command = f"ssh -i {shlex.quote(str(client.spare_key))} -o IdentitiesOnly=yes"
    code, result = _resolve(ssh_engine, ssh_engine.env(GIT_SSH_COMMAND=command))
    assert code == 0, result.output


def test_a_host_alias_of_the_users_ssh_config(
    ssh_engine: PrivateEngine, ssh_server: SshServer
) -> None:
    client = _spare_only(ssh_engine, ssh_server)
    client.ssh_config(
        f"Host engine-host\n    HostName 127.0.0.1\n    Port {ssh_server.port}\n"
        f"    User {ssh_server.user}\n    IdentityFile {client.spare_key}\n"
    )
    alias = f"{ssh_server.user}@engine-host:{ssh_engine.engine.bare}"
    code, result = _resolve(ssh_engine, ssh_engine.env(), alias)
    assert code == 0, result.output


def test_a_key_held_by_the_agent(ssh_engine: PrivateEngine, ssh_server: SshServer) -> None:
    client = _spare_only(ssh_engine, ssh_server)
    code, result = _resolve(ssh_engine, client.start_agent(client.spare_key))
    assert code == 0, result.output


@pytest.mark.slow
def test_uvs_git_uses_the_users_core_sshcommand_for_the_dependency(
    ssh_engine: PrivateEngine, ssh_server: SshServer, tmp_path: Path
) -> None:
    client = _spare_only(ssh_engine, ssh_server)
    client.git_config("core.sshCommand", f"ssh -i {client.spare_key} -o IdentitiesOnly=yes")
    result = install_private(ssh_engine, tmp_path / "env")
    assert result.code == 0, result.output
    assert "Accepted publickey" in ssh_server.log_text()


# --------------------------------------------------------------------------------------------
# Each failure: its own cause, ssh's own line, the remedy; nothing left behind


def _other_host_key(tmp_path: Path, port: int) -> str:
    key = tmp_path / "impostor"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return f"[127.0.0.1]:{port} " + " ".join(Path(f"{key}.pub").read_text().split()[:2])


CASES = {
    # case: (cause, ssh's own line, a piece of the remedy)
    "no key authorized": (
        "refused every ssh key offered",
        "Permission denied (publickey)",
        "ssh-add",
    ),
    "unknown host key": (
        "is not in your known_hosts, and an unknown key is never accepted",
        "Host key verification failed",
        "ssh-keygen -lf -",
    ),
    "changed host key": (
        "has CHANGED since it was recorded",
        "REMOTE HOST IDENTIFICATION HAS CHANGED",
        "ssh-keygen -R '[127.0.0.1]:",
    ),
    "connection refused": ("refused the connection", "Connection refused", "git server is up"),
    "unknown host name": (
        "does not resolve",
        "Could not resolve hostname no-such-host.invalid",
        "DNS",
    ),
    "no such repository": (
        "no repository at that path",
        "does not appear to be a git repository",
        "repository URL's path",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_ssh_failure_names_its_cause_and_changes_nothing(
    case: str, ssh_engine: PrivateEngine, ssh_server: SshServer, tmp_path: Path
) -> None:
    client, url = ssh_engine.client, ssh_engine.url
    if case == "no key authorized":
        ssh_server.authorized_keys.write_text("")
    elif case == "unknown host key":
        client.known_hosts.write_text("")
    elif case == "changed host key":
        client.known_hosts.write_text(_other_host_key(tmp_path, ssh_server.port) + "\n")
    elif case == "connection refused":
        url = url.replace(f":{ssh_server.port}/", f":{free_port()}/")
    elif case == "unknown host name":
        url = url.replace("127.0.0.1", "no-such-host.invalid")
    else:
        url = url.replace("origin.git", "missing.git")
    known_hosts = client.known_hosts.read_bytes()
    assert_refused_at_resolve(ssh_engine, url, tmp_path, CASES[case])
    assert client.known_hosts.read_bytes() == known_hosts


def test_a_refused_key_says_which_keys_ssh_had(
    ssh_engine: PrivateEngine, ssh_server: SshServer
) -> None:
    ssh_server.authorized_keys.write_text("")
    client = ssh_engine.client
    code, result = _resolve(ssh_engine, client.start_agent(client.spare_key))
    assert code == 1
    assert "the ssh-agent holds 1 key(s)" in result.stderr, result.stderr
    assert f"{client.key} (present)" in result.stderr, result.stderr
    client.git_config("core.sshCommand", f"ssh -i {client.spare_key}")
    code, result = _resolve(ssh_engine, ssh_engine.env())
    assert code == 1
    assert "no ssh-agent" in result.stderr
    assert f"ssh ran as your own command 'ssh -i {client.spare_key}'" in result.stderr


@pytest.mark.slow
def test_a_failed_dependency_fetch_names_the_dependency_and_keeps_the_engine(
    ssh_engine: PrivateEngine, ssh_server: SshServer, tmp_path: Path
) -> None:
    """The engine's repository is reachable, its private dependency's host is not trusted:
    uv's git refuses the unknown host key, the install names the dependency and rolls back."""
    target = tmp_path / "env"
    first = install_private(ssh_engine, target, branch="main")
    assert first.code == 0, first.output
    before = (target / ".automl-setup" / "engine-record.json").read_bytes()
    engine = ssh_engine.engine
    # The dependency at another name of the same host: a host key known_hosts lacks.
    moved = ssh_engine.dependency_url.replace("127.0.0.1", "localhost")
    engine.commit_engine(
        "dev/untrusted-dep", base="main", marker="untrusted",
        dependencies=[f"{DEPENDENCY} @ git+{moved}@{ssh_engine.dependency_commit}"],
    )  # fmt: skip
    known_hosts = ssh_engine.client.known_hosts.read_bytes()
    result = run_cli(
        "install", "--branch", "dev/untrusted-dep", "--python", str(target),
        *ssh_engine.profile(), env=ssh_engine.env(), whole_env=True,
    )  # fmt: skip
    assert result.code == 1, result.output
    assert f"uv could not fetch the engine's dependency {DEPENDENCY} ({moved}):" in result.stderr, (
        result.stderr
    )
    assert "is not in your known_hosts" in result.stderr
    assert "Host key verification failed" in result.stderr
    assert (target / ".automl-setup" / "engine-record.json").read_bytes() == before
    assert engine_marker(target) == "private-main"
    assert ssh_engine.client.known_hosts.read_bytes() == known_hosts
