"""Each transport failure read from the lines git, ssh, libcurl and uv really print (copied from
runs against the test servers of tests/remotes), without a transport: one cause each, the
transport's own line quoted, a remedy that never accepts a key or turns a check off."""

from __future__ import annotations

import pytest

from mcp_server.children.causes import (
    classify,
    declared_vcs,
    dependency_failure,
    endpoint,
)

SSH_URL = "ssh://root@127.0.0.1:40111/srv/engine.git"
HTTPS_URL = "https://127.0.0.1:40112/git/engine.git"
SSH_TRAILER = (
    "fatal: Could not read from remote repository.\n\n"
    "Please make sure you have the correct access rights\nand the repository exists.\n"
)

CASES = [
    # (url, stderr, kind, the quoted line starts with)
    (SSH_URL, "root@127.0.0.1: Permission denied (publickey).\n" + SSH_TRAILER,
     "ssh-key-refused", "root@127.0.0.1: Permission denied (publickey)."),
    (SSH_URL, "Host key verification failed.\n" + SSH_TRAILER,
     "host-key-unknown", "Host key verification failed."),
    (SSH_URL,
     "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
     "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
     "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
     "Host key for [127.0.0.1]:40111 has changed and you have requested strict checking.\n"
     "Host key verification failed.\n" + SSH_TRAILER,
     "host-key-changed", "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!"),
    (SSH_URL, "ssh: connect to host 127.0.0.1 port 40111: Connection refused\n" + SSH_TRAILER,
     "connection-refused", "ssh: connect to host 127.0.0.1 port 40111: Connection refused"),
    (SSH_URL,
     "ssh: Could not resolve hostname no-such-host.invalid: Name or service not known\n"
     + SSH_TRAILER, "dns", "ssh: Could not resolve hostname"),
    (SSH_URL,
     "fatal: '/srv/missing.git' does not appear to be a git repository\n" + SSH_TRAILER,
     "repository-not-found", "fatal: '/srv/missing.git' does not appear"),
    (HTTPS_URL,
     "fatal: could not read Username for 'https://127.0.0.1:40112': terminal prompts disabled",
     "credentials-missing", "fatal: could not read Username"),
    (HTTPS_URL,
     "fatal: Authentication failed for 'https://127.0.0.1:40112/git/engine.git/'",
     "credentials-rejected", "fatal: Authentication failed"),
    (HTTPS_URL,
     "remote: forbidden\nfatal: unable to access 'https://127.0.0.1:40112/git/engine.git/': "
     "The requested URL returned error: 403", "credentials-forbidden", "fatal: unable to access"),
    (HTTPS_URL, "fatal: repository 'https://127.0.0.1:40112/git/engine.git/' not found",
     "repository-not-found", "fatal: repository"),
    (HTTPS_URL,
     "fatal: unable to access 'https://127.0.0.1:40112/git/engine.git/': server certificate "
     "verification failed. CAfile: none CRLfile: none", "certificate-untrusted",
     "fatal: unable to access"),
    (HTTPS_URL,
     "fatal: unable to access 'https://127.0.0.1:40112/git/engine.git/': Failed to connect to "
     "127.0.0.1 port 40112 after 0 ms: Couldn't connect to server", "connection-refused",
     "fatal: unable to access"),
    (HTTPS_URL,
     "fatal: unable to access 'https://no-such-host.invalid/git/engine.git/': Could not resolve "
     "host: no-such-host.invalid", "dns", "fatal: unable to access"),
]  # fmt: skip


@pytest.mark.parametrize(("url", "stderr", "kind", "line"), CASES, ids=[c[2] for c in CASES])
def test_each_transport_failure_is_its_own_cause(
    url: str, stderr: str, kind: str, line: str
) -> None:
    failure = classify(stderr, url)
    assert failure is not None
    assert failure.kind == kind
    assert failure.reason.startswith(line), failure.reason
    assert "Could not read from remote repository" not in failure.reason
    text = f"{failure.cause} {failure.remedy}".lower()
    # Never the advice to accept a key blindly or to turn verification off.
    for forbidden in ("stricthostkeychecking", "sslverify", "ssl_no_verify", "accept-new"):
        assert forbidden not in text, (forbidden, text)


def test_the_remedies_name_the_way_out() -> None:
    def remedy(url: str, stderr: str) -> str:
        failure = classify(stderr, url)
        assert failure is not None
        return failure.remedy

    assert "ssh-keyscan -p 40111 127.0.0.1 | ssh-keygen -lf -" in remedy(
        SSH_URL, "Host key verification failed."
    )
    changed = remedy(SSH_URL, "WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!")
    assert "ssh-keygen -R '[127.0.0.1]:40111'" in changed
    assert "ssh -T -p 40111 root@127.0.0.1" in remedy(SSH_URL, "Permission denied (publickey).")
    missing = remedy(HTTPS_URL, "fatal: could not read Username for 'x': terminal prompts disabled")
    assert "credential helper" in missing and ".mcp.json" in missing and "env_vars" in missing
    untrusted = remedy(HTTPS_URL, "server certificate verification failed. CAfile: none")
    assert "http.https://127.0.0.1:40112/.sslCAInfo" in untrusted and "GIT_SSL_CAINFO" in untrusted
    assert "never turned off" in untrusted


def test_a_rejected_url_credential_is_not_called_missing() -> None:
    """A token from the URL goes as a header; a server that then asks for credentials rejected
    it (git says it could not read a user name, as if none had been given)."""
    stderr = "fatal: could not read Username for 'https://h': terminal prompts disabled"
    failure = classify(stderr, HTTPS_URL, sent_credentials=True)
    assert failure is not None and failure.kind == "credentials-rejected"


def test_an_unknown_failure_is_left_to_gits_own_words() -> None:
    assert classify("fatal: the remote end hung up unexpectedly", HTTPS_URL) is None


def test_an_unknown_ssh_failure_quotes_ssh_not_gits_generic_trailer() -> None:
    from mcp_server.children.git import _git_cause

    stderr = "kex_exchange_identification: Connection closed by remote host\n" + SSH_TRAILER
    assert classify(stderr, SSH_URL) is None
    assert _git_cause(stderr) == "kex_exchange_identification: Connection closed by remote host"
    assert _git_cause(SSH_TRAILER) == "fatal: Could not read from remote repository."


def test_endpoints_of_every_url_form() -> None:
    assert endpoint("git@github.com:org/repo.git").where == "github.com"
    assert endpoint("git@github.com:org/repo.git").ssh_target() == "ssh -T git@github.com"
    ssh = endpoint("ssh://git@host.example:2222/org/repo.git")
    assert (ssh.where, ssh.known_hosts_name) == ("host.example:2222", "[host.example]:2222")
    assert endpoint("https://host.example/org/repo.git").where == "host.example"
    assert endpoint("file:///srv/repo.git").scheme == "file"


# uv's report of a failed fetch of a VCS dependency, as uv 0.13 prints it: at full width, and
# wrapped to a narrow terminal (the URL's user masked either way).
UV_FULL = """Using Python 3.11.7 environment at: venv
   Updating ssh://****@localhost:40111/srv/privdep.git (0123abcd)
error: Failed to download and build `privdep @ git+ssh://****@localhost:40111/srv/privdep.git@0123abcd`
  cause: Git operation failed
  cause: failed to clone into: /root/.cache/uv/git-v2/db/378d6d67f7f00f50
  cause: process didn't exit successfully: `/usr/bin/git fetch --force --update-head-ok 'ssh://****@localhost:40111/srv/privdep.git' '+HEAD:refs/remotes/origin/HEAD'` (exit status: 128)
         --- stderr
         Host key verification failed.
         fatal: Could not read from remote repository.

         Please make sure you have the correct access rights
         and the repository exists.
"""  # noqa: E501
UV_WRAPPED = """  cause: failed to fetch commit `0123abcd`
  cause: process didn't exit successfully:
         `/usr/bin/git fetch --force --update-head-ok
         'ssh://****@localhost:40111/srv/privdep.git'
         '+0123abcd:refs/commit/0123abcd'`
         (exit status: 128)
         --- stderr
         Host key verification failed.
         fatal: Could not read from remote repository.
"""


@pytest.mark.parametrize("output", [UV_FULL, UV_WRAPPED], ids=["full", "wrapped"])
def test_a_dependency_uv_could_not_fetch_is_named_by_its_declared_url(output: str) -> None:
    declared = declared_vcs(
        ["pyyaml>=6", "privdep @ git+ssh://root@localhost:40111/srv/privdep.git@0123abcd"]
    )
    assert declared == {"privdep": "ssh://root@localhost:40111/srv/privdep.git"}
    found = dependency_failure(output, declared)
    assert found is not None
    assert (found.name, found.url) == ("privdep", "ssh://root@localhost:40111/srv/privdep.git")
    assert found.failure.kind == "host-key-unknown"
    assert found.failure.reason == "Host key verification failed."


def test_uv_output_without_a_git_failure_is_no_dependency_failure() -> None:
    output = "error: No solution found when resolving dependencies:\n  ╰─▶ Because x..."
    assert dependency_failure(output) is None
