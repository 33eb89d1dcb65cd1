"""MCP roots: the directories a client lets this server touch. When the client declares roots,
every path argument of every tool must resolve (symlinks followed) inside one of them, or the
tool refuses before anything runs; a client that declares none sees no difference.

The roots are fetched for every call (a resolver returning `ListRoots`), so a change the client
announces with `notifications/roots/list_changed` - or does not announce at all - is seen by
the very next call: there is no cached list that could be stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated
from urllib.parse import unquote, urlparse

from mcp.server.mcpserver import Context, ListRoots, Resolve
from mcp.server.mcpserver.resolve import (
    build_resolver_plans,
    find_resolved_parameters,
    resolve_arguments,
)
from mcp.types import InputRequiredResult, ListRootsResult

from mcp_server.errors import InvalidInput
from mcp_server.fsutil import real_path

STEP = "check roots"


def root_path(uri: str) -> Path | None:
    """The local directory a `file://` root names, or None for one on another host (it
    contains nothing here)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return Path(unquote(parsed.path))


def inside_roots(path: str | Path, roots: Sequence[str | Path]) -> bool:
    """Whether `path`, with `..` and every symlink resolved (a path that does not exist yet
    resolves through its existing part), is one of `roots` or below one; the roots are
    resolved the same way, so a root that is itself a symlink names its target."""
    resolved = _resolved(path)
    if resolved is None:  # a symlink loop is inside nothing
        return False
    real_roots = (real for real in map(_resolved, roots) if real is not None)
    return any(resolved == real or real in resolved.parents for real in real_roots)


def _resolved(path: str | Path) -> Path | None:
    # As the value types read a path (mcp_server/values.py): `~` expanded, then resolved the
    # way the OS follows it (a `..` after a symlink leaves the symlink's target), by
    # `real_path`, not `Path.resolve()`, whose answer for a symlink loop depends on the Python
    # version (3.13 no longer raises).
    try:
        return real_path(path)
    except OSError:  # ELOOP: a symlink loop
        return None


def environment_of(python: str) -> Path:
    """The directory a `python` argument makes the tool change: a venv directory (or one to
    be created) as given; for an interpreter, the venv CPython finds it in by its name, not its
    target (pyvenv.cfg one level above its bin/), else the interpreter's own resolved file. So
    a symlink inside a root to a venv's interpreter elsewhere, which runs as that venv's base
    Python, is judged by where it really runs."""
    given = Path(python).expanduser().absolute()
    if not given.is_file():
        return given
    venv = given.parent.parent
    return venv if (venv / "pyvenv.cfg").is_file() else given


def client_roots(ctx: Context) -> ListRoots | None:
    """Resolver: ask the client for its roots when it declares the capability; None (no
    confinement) when it does not."""
    caps = ctx.client_capabilities
    return ListRoots() if caps is not None and caps.roots is not None else None


Roots = Annotated[ListRootsResult | None, Resolve(client_roots)]


async def _roots_parameter(roots: Roots) -> None:
    """Only its signature is used: the resolved parameter a resource read resolves as a tool
    call would (the SDK resolves `Resolve` parameters of tools only)."""


_RESOURCE_ROOTS = find_resolved_parameters(_roots_parameter)
_RESOURCE_PLANS = build_resolver_plans(_RESOURCE_ROOTS, set())


async def resource_roots(ctx: Context) -> ListRootsResult | InputRequiredResult | None:
    """The client's roots for a resource read: asked for as a tool call asks (a standalone
    `roots/list` request, or an input-required round trip on protocols that have one)."""
    got = await resolve_arguments(_RESOURCE_ROOTS, _RESOURCE_PLANS, {}, ctx)
    if isinstance(got, InputRequiredResult):
        return got
    roots: ListRootsResult | None = got["roots"]
    return roots


def check_roots(
    roots: ListRootsResult | None,
    *,
    python: str | None = None,
    workspace: str | None = None,
    manifest: str | None = None,
    profile_file: str | None = None,
    out: str | None = None,
    wheel: str | None = None,
    repository: str | None = None,
) -> None:
    """Refuse (InvalidInput, step "check roots") when a path argument lies outside every root
    the client declared. No roots declared, or an empty list, confines nothing: the client
    has said nothing about where the server may go."""
    if roots is None or not roots.roots:
        return
    uris = [str(root.uri) for root in roots.roots]
    local = [path for path in map(root_path, uris) if path is not None]
    # What each argument names, and the path judged for it (python: its environment).
    named = {
        "python": (python, environment_of(python) if python is not None else None),
        "workspace": (workspace, workspace),
        "manifest": (manifest, manifest),
        "profile.file": (profile_file, profile_file),
        "out": (out, out),
        "wheel": (wheel, wheel),
        # A file:// repository is read (git fetches from it): it is a path like any other.
        "repository": (repository, root_path(repository) if repository is not None else None),
    }
    outside = [
        _shown(name, given, judged)
        for name, (given, judged) in named.items()
        if given is not None and judged is not None and not inside_roots(judged, local)
    ]
    if outside:
        raise InvalidInput(
            STEP,
            f"{'; '.join(outside)}: outside the client's roots ({', '.join(uris)}); "
            "nothing was touched",
            "pass paths inside one of the roots, or ask the user to add the directory to the "
            "client's roots",
        )


def _shown(name: str, given: str, judged: str | Path) -> str:
    """`name given`, with where it really leads when that is not the text given."""
    real = _resolved(judged)
    if real is None:
        return f"{name} {given} (a symlink loop)"
    return f"{name} {given}" if str(real) == given else f"{name} {given} (resolves to {real})"


def first_root(roots: ListRootsResult | None) -> Path | None:
    """The client's first local root (the user's project), if it declared one."""
    local = [p for p in (root_path(str(r.uri)) for r in (roots.roots if roots else [])) if p]
    return local[0] if local else None
