"""Running git: an argv list (no shell), stdin closed, no terminal and no prompt (run.py), the
transport allow-list enforced by git itself (GIT_ALLOW_PROTOCOL), a time limit and the call's
stall bound, and a failure told by its transport's own cause (causes.py).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from mcp_server.children.bound import Watch
from mcp_server.children.causes import (
    SSH_KINDS,
    TransportFailure,
    classify,
    endpoint,
    stall_refusal,
)
from mcp_server.children.run import NO_PROMPT, run_captured
from mcp_server.children.watch import Stalled
from mcp_server.errors import SetupError
from mcp_server.redact import redact_text

NETWORK_TIMEOUT_S = 900.0
LOCAL_TIMEOUT_S = 120.0


def git_environment() -> dict[str, str]:
    """Environment for every git call: transport allow-list, no prompt, no pager. The user's
    own ssh command (GIT_SSH_COMMAND, core.sshCommand), ssh config, agent, credential helpers
    and certificate settings stay in force: git runs without a terminal instead (run.py)."""
    return {
        "GIT_ALLOW_PROTOCOL": "file:https:ssh",
        **NO_PROMPT,
        "GIT_PAGER": "cat",
        "GIT_NO_REPLACE_OBJECTS": "1",
        # Our scratch directories live in the temp dir: never discover a repository above it.
        "GIT_CEILING_DIRECTORIES": tempfile.gettempdir(),
    }


class TransportError(SetupError):
    """git could not reach the repository: the transport's cause, its own line, the remedy."""

    def __init__(self, step: str, failure: TransportFailure, url: str) -> None:
        tried = ssh_keys_tried(url) if failure.kind == "ssh-key-refused" else []
        super().__init__(
            step,
            f"{failure.cause} [{redact_text(url)}]",
            failure.remedy,
            details=[f"{_reporter(failure)} said: {failure.reason}", *tried],
        )
        self.failure = failure


def _reporter(failure: TransportFailure) -> str:
    ssh = failure.kind in SSH_KINDS or failure.reason.startswith("ssh:")
    return "ssh" if ssh else "git"


def _local(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    """A quick local question (ssh-add, ssh -G, git config), without a terminal."""
    try:
        env = {**os.environ, "LC_ALL": "C", **NO_PROMPT}
        return run_captured(argv, timeout=5, env=env, cwd=Path(tempfile.gettempdir()))
    except (OSError, subprocess.TimeoutExpired):
        return None


def ssh_keys_tried(url: str) -> list[str]:
    """Which keys ssh had to offer for `url`: the agent's, and the identity files the user's
    ssh configuration names for that host (or that the user's own ssh command chose them)."""
    at = endpoint(url)
    notes = []
    configured = _local(["git", "config", "--get", "core.sshCommand"])
    command = os.environ.get("GIT_SSH_COMMAND") or (
        configured.stdout.strip() if configured and configured.returncode == 0 else ""
    )
    if command:
        notes.append(f"ssh ran as your own command {command!r}: its options chose the keys")
    socket = os.environ.get("SSH_AUTH_SOCK")
    listed = _local(["ssh-add", "-l"]) if socket else None
    if not socket:
        notes.append("no ssh-agent: SSH_AUTH_SOCK is not set for this process")
    elif listed is None or listed.returncode == 2:
        notes.append(f"the ssh-agent at SSH_AUTH_SOCK={socket} does not answer")
    elif listed.returncode == 1:
        notes.append(f"the ssh-agent at SSH_AUTH_SOCK={socket} holds no keys")
    else:
        notes.append(f"the ssh-agent holds {len(listed.stdout.splitlines())} key(s)")
    if not command and at.host:
        port = ["-p", str(at.port)] if at.port else []
        login = f"{at.user}@{at.host}" if at.user else at.host
        shown = _local(["ssh", "-G", *port, "--", login])
        files = [
            line.split(" ", 1)[1]
            for line in (shown.stdout.splitlines() if shown and shown.returncode == 0 else [])
            if line.startswith("identityfile ")
        ]
        if files:
            states = (
                f"{f} ({'present' if Path(f).expanduser().exists() else 'absent'})" for f in files
            )
            named = ", ".join(states)
            notes.append(f"key files your ssh configuration names for {at.host}: {named}")
    return notes


def run_git(
    args: list[str],
    *,
    cwd: Path | None = None,
    step: str,
    timeout: float,
    watch: Watch | None,
    config: dict[str, str] | None = None,
) -> str:
    """Run git with an argv list; failures become a SetupError naming the step (redacted).

    `config` reaches git through GIT_CONFIG_KEY_n/VALUE_n: values that may hold credentials
    (a repository URL) never appear on a command line other users can read. A git that waits
    on a remote without progress for `watch`'s bound is stopped (None: a local repository,
    the time limit alone)."""
    argv = ["git", "-c", "protocol.ext.allow=never", "-c", "core.hooksPath=/dev/null"]
    # No background maintenance in throw-away repositories: it only costs time.
    argv += ["-c", "maintenance.auto=false", "-c", "gc.auto=0", *args]
    env = git_environment()
    for index, (key, value) in enumerate((config or {}).items()):
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
    env["GIT_CONFIG_COUNT"] = str(len(config or {}))
    url = next((v for k, v in (config or {}).items() if k.endswith(".url")), "")
    # English messages (causes.classify reads them). git's own session: no terminal to
    # prompt on, and stopping it (a stall, a timeout, our interrupt) stops its helpers (ssh,
    # remote-https, upload-pack) too, so no orphan keeps our pipes open.
    full_env = {**os.environ, "LANGUAGE": "C", "LC_ALL": "C", **env}
    try:
        proc = run_captured(argv, timeout=timeout, step=step, watch=watch, env=full_env, cwd=cwd)
    except Stalled as exc:
        raise stall_refusal(step, url, exc.stall) from None
    except subprocess.TimeoutExpired:
        raise SetupError(
            step,
            f"git took longer than {timeout:.0f} s and was stopped",
            f"check the network and the machine's load; the {step} step changed nothing "
            "in your environment",
        ) from None
    if proc.returncode != 0:
        stderr = proc.stderr.strip()
        sent = any(key.endswith(".extraHeader") for key in config or {})
        failure = classify(stderr, url, sent_credentials=sent) if url else None
        if failure is not None:
            raise TransportError(step, failure, url)
        cause = _git_cause(stderr) or f"git exited with status {proc.returncode}"
        raise SetupError(step, f"git failed: {cause}", _git_remedy(step, stderr))
    return proc.stdout.removesuffix("\n")


# The trailer git adds to every ssh failure: the line before it is the one that says why.
_GENERIC = (
    "fatal: Could not read from remote repository.",
    "Please make sure you have the correct access rights",
    "and the repository exists.",
)


def _git_cause(stderr: str) -> str:
    """git's (or its helper's) own line: the first `fatal:`/`error:` line, else the first
    line, passing over git's generic ssh trailer when anything else was said."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if line not in _GENERIC] or lines
    for line in said:
        if line.startswith(("fatal:", "error:")):
            return line
    return said[0] if said else ""


def _git_remedy(step: str, stderr: str) -> str:
    lowered = stderr.lower()
    if "not allowed" in lowered or "transport" in lowered:
        return "only https, ssh and file repositories are allowed"
    if any(s in lowered for s in ("could not read", "does not appear", "not found", "unable")):
        return "check the repository URL and your access to it (git ls-remote <url>)"
    return f"see the git message above; the {step} step changed nothing in your environment"
