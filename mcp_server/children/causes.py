"""Why git (or the git uv starts) could not reach a repository, in the transport's own words,
and what to do about it: one refusal per cause, never "could not read from remote".

`classify` reads the stderr of git and the ssh or https helper it ran (English: every child
runs with LC_ALL=C) and picks the cause by the lines OpenSSH, git and libcurl print for it;
the line it quotes is the transport's own, credentials masked. Nothing here runs a network
call: the remedies name the commands the user runs to check, never what would accept a key or
turn a check off on their behalf.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from mcp_server.children.watch import Stall
from mcp_server.errors import Arg, SetupError
from mcp_server.redact import redact_text, strip_credentials
from mcp_server.values import SCP_URL


@dataclass(frozen=True)
class Endpoint:
    """Where a repository URL points: its transport and host (a URL's user, never a secret)."""

    scheme: str  # ssh, https, file
    host: str
    port: int | None
    user: str | None

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}" if self.port else self.host

    @property
    def known_hosts_name(self) -> str:
        """The name known_hosts files it under: `[host]:port` off the default port."""
        return f"[{self.host}]:{self.port}" if self.port and self.port != 22 else self.host

    def ssh_target(self) -> str:
        """`ssh -T` arguments that reach the same account (for the user to run)."""
        port = ["-p", str(self.port)] if self.port and self.port != 22 else []
        login = f"{self.user}@{self.host}" if self.user else self.host
        return shlex.join(["ssh", "-T", *port, login])


def endpoint(url: str) -> Endpoint:
    parts = urlsplit(url)
    if "://" in url:
        return Endpoint(parts.scheme, parts.hostname or "", parts.port, parts.username)
    match = SCP_URL.fullmatch(url)  # user@host:path is ssh
    if match is None:
        return Endpoint("file", "", None, None)
    return Endpoint("ssh", match["host"], None, match["user"])


@dataclass(frozen=True)
class TransportFailure:
    """One cause: what it is in words, the transport's own line, and the remedy."""

    kind: str
    cause: str
    reason: str  # the transport's own line (redacted)
    remedy: str


def _line(stderr: str, pattern: re.Pattern[str]) -> str | None:
    for line in stderr.splitlines():
        if pattern.search(line):
            return redact_text(line.strip())
    return None


# The causes only ssh reports (the others may come from ssh, git or libcurl).
SSH_KINDS = frozenset({"host-key-changed", "host-key-unknown", "ssh-key-refused"})

_CHANGED = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed")
_HOST_KEY_FAILED = re.compile(r"Host key verification failed")
_UNKNOWN_KEY = re.compile(r"No \S+ host key is known for|authenticity of host .* can't be")
_KEY_REFUSED = re.compile(r"Permission denied \((?:publickey|[a-z,-]*publickey)")


MCP_ENV = (
    "for the MCP server, the client must start it with the same variables your shell has "
    "(`env` of the server in .mcp.json, `env_vars` in .codex/config.toml: HOME, SSH_AUTH_SOCK, "
    "GIT_CONFIG_GLOBAL or the helper's own variables)"
)


def classify(stderr: str, url: str, sent_credentials: bool = False) -> TransportFailure | None:
    """The cause of a failed git transport from its stderr, or None when it is no transport
    failure this knows (the caller keeps git's own first line then). `sent_credentials`: the
    URL's own credential went along (as a header), so a server asking for one rejected it."""
    at = endpoint(url)
    where = at.where or ("this machine" if at.scheme == "file" else "the repository's host")
    if at.scheme == "ssh":
        found = _ssh(stderr, at, where)
        if found is not None:
            return found
    for cause in _CAUSES:
        line = _line(stderr, cause.pattern)
        if line is not None:
            if cause.kind == "credentials-missing" and sent_credentials:
                cause = _REJECTED_CAUSE
            words = {"where": where, "host": at.host or where, "scheme": at.scheme}
            return TransportFailure(
                cause.kind, cause.cause.format(**words), line, cause.remedy.format(**words)
            )
    return None


def _ssh(stderr: str, at: Endpoint, where: str) -> TransportFailure | None:
    changed = _line(stderr, _CHANGED)
    if changed is not None:
        return TransportFailure(
            "host-key-changed",
            f"the ssh host key of {where} has CHANGED since it was recorded in known_hosts "
            "(someone may be intercepting the connection, or the server was reinstalled); ssh "
            "refused to connect",
            changed,
            "ask the server's administrator for its current key fingerprint; only when it "
            f"matches, remove the old entry (`ssh-keygen -R '{at.known_hosts_name}'`) and add "
            "the new one; automl-setup never accepts a host key for you",
        )
    failed = _line(stderr, _HOST_KEY_FAILED)
    if failed is not None:
        unknown = _line(stderr, _UNKNOWN_KEY)
        keyscan = shlex.join(
            ["ssh-keyscan", *(["-p", str(at.port)] if at.port else []), at.host or "HOST"]
        )
        return TransportFailure(
            "host-key-unknown",
            f"the ssh host key of {where} is not in your known_hosts, and an unknown key is "
            "never accepted without you",
            unknown or failed,
            f"compare the server's key fingerprint (`{keyscan} | ssh-keygen -lf -`) with the "
            "one its administrator publishes; only when it matches, add it to "
            f"~/.ssh/known_hosts (`{keyscan} >> ~/.ssh/known_hosts`), or connect once by hand "
            f"(`{at.ssh_target()}`) and answer the question yourself",
        )
    refused = _line(stderr, _KEY_REFUSED)
    if refused is not None:
        return TransportFailure(
            "ssh-key-refused",
            f"{where} refused every ssh key offered (no key, or none it accepts)",
            refused,
            "load your key into the agent (`ssh-add ~/.ssh/<key>`) or name it for this host "
            "in ~/.ssh/config (IdentityFile) or core.sshCommand, and check that its public "
            f"half is authorized on the server; test with `{at.ssh_target()}`; " + MCP_ENV,
        )
    return None


@dataclass(frozen=True)
class _Cause:
    """A cause any transport can report: the lines that say it, and its words ({where}: the
    host and port, {host}, {scheme})."""

    pattern: re.Pattern[str]
    kind: str
    cause: str
    remedy: str


_REJECTED_CAUSE = _Cause(
    re.compile(r"Authentication failed for|returned error: 401"),
    "credentials-rejected",
    "{where} rejected the credentials given (HTTP 401: a wrong or expired token)",
    "renew the token and store it in your credential helper (`git credential reject` forgets "
    "the old one), then try again",
)
# In this order: a missing name says nothing of credentials, a refused connection nothing of
# certificates.
_CAUSES = (
    _Cause(
        re.compile(
            r"Could not resolve hostname|Could not resolve host|Name or service not known|"
            r"Temporary failure in name resolution|nodename nor servname"
        ),
        "dns",
        "the host name {host} does not resolve",
        "check the spelling of the host in the repository URL (or your ssh config's Host "
        "alias), and this machine's DNS (VPN or resolver)",
    ),
    _Cause(
        re.compile(r"Connection refused|Couldn't connect to server|Failed to connect to"),
        "connection-refused",
        "{where} refused the connection (nothing listens on that port, or a firewall rejects it)",
        "check the host and port of the repository URL (and any url.<base>.insteadOf "
        "rewriting it), and that the git server is up",
    ),
    _Cause(
        re.compile(r"No route to host|Network is unreachable|Connection timed out"),
        "host-unreachable",
        "{where} cannot be reached from this machine",
        "check the network route to it (VPN, proxy settings, firewall), then try again",
    ),
    _Cause(
        re.compile(
            r"server certificate verification failed|SSL certificate problem|certificate "
            r"verify failed|unable to get local issuer certificate|self[- ]signed certificate",
            re.IGNORECASE,
        ),
        "certificate-untrusted",
        "the TLS certificate of {where} is not trusted by git's certificate store",
        "give git the certificate authority that signed it: `git config --global "
        "http.https://{where}/.sslCAInfo /path/to/ca.pem` (or GIT_SSL_CAINFO); verification "
        "is never turned off",
    ),
    _Cause(
        re.compile(r"could not read (?:Username|Password) for"),
        "credentials-missing",
        "{where} asked for credentials and none were available (git may not prompt here: "
        "nothing ever asks a terminal)",
        "give git a credential helper that holds a token for this host (e.g. `gh auth "
        "setup-git`, or `git config --global credential.helper store` then one `git "
        "ls-remote {scheme}://{where}/...` by hand), then try again; " + MCP_ENV,
    ),
    _REJECTED_CAUSE,
    _Cause(
        re.compile(r"returned error: 403"),
        "credentials-forbidden",
        "{where} accepted the credentials but denies this repository to them (HTTP 403)",
        "ask for read access to the repository, or use a token with the scope to read it",
    ),
    _Cause(
        re.compile(
            r"does not appear to be a git repository|repository '.*' not found|returned "
            r"error: 404|Repository not found|No such file or directory|not a git repository"
        ),
        "repository-not-found",
        "no repository at that path on {where} (or it is hidden from these credentials)",
        "check the repository URL's path, and that your account can see the repository",
    ),
    _Cause(
        re.compile(r"gnutls_handshake\(\) failed|SSL_connect|TLS connect error", re.IGNORECASE),
        "tls-failed",
        "the TLS handshake with {where} failed",
        "check that the URL's port speaks https, and any proxy between you and the host",
    ),
)


# uv names the VCS requirement it could not fetch in backquotes (`dep @ git+URL`), then quotes
# git's stderr under `--- stderr`, indented.
_UV_REQUIREMENT = re.compile(
    r"`(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]`]*\])? @ git\+(?P<url>[^`\s]+)`"
)
_UV_GIT_FETCH = re.compile(r"git fetch .*?'(?P<url>(?:https|ssh|file)://[^']+)'")


@dataclass(frozen=True)
class DependencyFailure:
    """A VCS dependency uv could not fetch: its name and URL (credentials stripped), and why."""

    name: str | None
    url: str
    failure: TransportFailure


def dependency_failure(
    uv_output: str, declared: dict[str, str] | None = None
) -> DependencyFailure | None:
    """The transport failure of a git fetch uv ran for a VCS dependency, from uv's output.
    uv masks a URL's user (`****`): a dependency the engine declares is named by its declared
    URL (`declared`: name -> URL, credentials stripped)."""
    before, marker, quoted = uv_output.partition("--- stderr")
    git_stderr = "\n".join(line.strip() for line in quoted.splitlines()) if marker else ""
    # uv wraps its long lines to the terminal's width: read them joined.
    joined = " ".join(line.strip() for line in before.splitlines())
    requirement = _UV_REQUIREMENT.search(joined)
    fetched = _UV_GIT_FETCH.search(joined)
    url = fetched["url"] if fetched else _repository(requirement["url"]) if requirement else None
    if not git_stderr or url is None:
        return None
    name = requirement["name"] if requirement else None
    if name is None:  # uv named only the URL it fetched (its user masked): the declared one
        name = next((n for n, u in (declared or {}).items() if _same_place(u, url)), None)
    known = (declared or {}).get(canonicalize_name(name)) if name else None
    if known is not None:
        url = known
    failure = classify(git_stderr, url)
    if failure is None:
        return None
    return DependencyFailure(name, redact_text(url), failure)


def declared_vcs(requires_dist: tuple[str, ...] | list[str]) -> dict[str, str]:
    """name -> repository URL (no `git+`, credentials stripped) of the VCS requirements among
    a wheel's Requires-Dist."""
    found: dict[str, str] = {}
    for text in requires_dist:
        with contextlib.suppress(InvalidRequirement):
            requirement = Requirement(text)
            if requirement.url and requirement.url.startswith("git+"):
                url = strip_credentials(requirement.url.removeprefix("git+"))
                found[canonicalize_name(requirement.name)] = _repository(url)
    return found


def _same_place(one: str, other: str) -> bool:
    """Whether two repository URLs name the same host, port and path (users aside)."""
    a, b = urlsplit(one), urlsplit(_repository(other))
    return (a.scheme, a.hostname, a.port, a.path) == (b.scheme, b.hostname, b.port, b.path)


def _repository(url: str) -> str:
    """A VCS requirement's URL without its `@revision` and `#fragment`: the repository."""
    parts = urlsplit(url)
    path, at, _revision = parts.path.rpartition("@")
    return urlunsplit(parts._replace(path=path if at else parts.path, fragment=""))


def stall_refusal(
    step: str, url: str | None, stall: Stall, details: list[str] | None = None
) -> SetupError:
    """A remote that stopped answering: the host, the step, what it waited on and what had
    arrived. `url` is the repository when git was fetching it (uv's fetches name theirs in the
    connections they held)."""
    if url:
        host, named = endpoint(url).where or "the repository's host", f" [{redact_text(url)}]"
    else:
        peers = sorted({c.peer for c in stall.connections})
        host, named = (", ".join(peers) if peers else "a remote host"), ""
    return SetupError(
        step,
        f"{host} stopped answering: {stall.describe()}{named}",
        [
            f"check that {host} is up and reachable (a proxy, VPN or the server itself may "
            "hang), then try again; a network that is merely that slow needs a longer bound (",
            Arg("stall_timeout"),
            f", now {stall.bound_s:g} s); nothing was changed by this step",
        ],
        details=details,
    )
