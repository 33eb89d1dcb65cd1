"""uv, the one that ships with automl-setup: run outside any active virtual environment, its
output appended to a log, in a session of its own without a terminal or an askpass program (the
git and ssh it starts for a VCS dependency too), under the call's stall bound; a failure told by
the transport's own cause when it could not fetch a dependency (causes.py).
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from mcp_server.children.bound import Watch
from mcp_server.children.causes import declared_vcs, dependency_failure, stall_refusal
from mcp_server.children.run import NO_PROMPT, run_captured, run_to
from mcp_server.children.watch import Stalled
from mcp_server.errors import SetupError
from mcp_server.fsutil import open_log, storage_cause, storage_remedy
from mcp_server.redact import redact_text

UV_TIMEOUT_S = 1800.0
UV_REMEDY = (
    "see the uv messages below; fix the cause (network, disk, dependency conflict) and run the "
    "install again"
)


def uv_binary() -> str:
    """The uv executable that ships with automl-setup (a dependency), never a random one."""
    from uv import find_uv_bin

    return find_uv_bin()


@functools.cache
def uv_version() -> str:
    return run_captured([uv_binary(), "--version"], timeout=60, check=True).stdout.strip()


def run_logged(
    argv: list[str],
    log_path: Path,
    *,
    step: str,
    env: dict[str, str],
    timeout: float,
    watch: Watch,
    cwd: Path | None = None,
) -> int:
    """Run uv with all its output appended to `log_path` (never to our stdout, which may be an
    MCP channel): its exit status. A stall under `watch` or the time limit is a refusal of
    `step`, its whole session stopped (uv's own git and ssh too: nothing left behind)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**env, **NO_PROMPT, "LANGUAGE": "C", "LC_ALL": "C.UTF-8"}  # git's words, in English
    with os.fdopen(open_log(log_path), "ab") as log:
        try:
            return run_to(
                argv, step=step, timeout=timeout, watch=watch, stdout=log, env=env, cwd=cwd
            )
        except Stalled as exc:
            raise stall_refusal(step, None, exc.stall, details=log_tail(log_path, 3)) from None
        except subprocess.TimeoutExpired:
            raise SetupError(
                step,
                f"{Path(argv[0]).name} took longer than {timeout:.0f} s and was stopped",
                "check the network and the machine's load, then run the install again",
            ) from None


def run_uv(
    argv: list[str],
    log_path: Path,
    *,
    step: str,
    watch: Watch,
    cause: str = "uv exited with status {returncode}",
    remedy: str = UV_REMEDY,
    requires_dist: tuple[str, ...] = (),
    timeout: float = UV_TIMEOUT_S,
) -> None:
    """uv (outside any active virtual environment), logged to `log_path`; a failure raises
    `cause` (with `{returncode}`) and `remedy` with uv's last lines, or names the VCS
    dependency it could not fetch (uv_refusal)."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    returncode = run_logged(argv, log_path, step=step, env=env, timeout=timeout, watch=watch)
    if returncode != 0:
        raise uv_refusal(step, log_path, cause.format(returncode=returncode), remedy, requires_dist)


def uv_refusal(
    step: str, log_path: Path, cause: str, remedy: str, requires_dist: tuple[str, ...] = ()
) -> SetupError:
    """A failed uv run: a VCS dependency it could not fetch, named (by the URL the engine's
    `requires_dist` declares, where it does) with the transport's own cause and remedy
    (causes.py); anything else as `cause` and `remedy`, with uv's last lines."""
    text = log_path.read_text(encoding="utf-8", errors="replace")
    found = dependency_failure(text, declared_vcs(requires_dist))
    if found is None:
        storage = storage_cause(text, log_path.parent)  # uv names the file it could not write
        remedy = storage_remedy(*storage) or remedy if storage else remedy
        return SetupError(step, cause, remedy, details=log_tail(log_path))
    named = f"{found.name} ({found.url})" if found.name else found.url
    said = next((line for line in text.splitlines() if line.startswith("error:")), "")
    return SetupError(
        step,
        f"uv could not fetch the engine's dependency {named}: {found.failure.cause}",
        f"{found.failure.remedy}; uv runs git with your own git and ssh settings, so what "
        f"makes `git ls-remote {found.url}` work makes this work",
        details=[f"git said: {found.failure.reason}", *([f"uv said: {said}"] if said else [])],
    )


def log_tail(log_path: Path, lines: int = 12) -> list[str]:
    """The last lines of a child's log, credentials masked."""
    text = log_path.read_text(encoding="utf-8", errors="replace")
    return [redact_text(line) for line in text.splitlines()[-lines:]]
