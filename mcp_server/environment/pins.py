"""Pinning the engine's dependency closure: moving references found and refused
(`install --require-pinned`), and every member of a bound closure pinned for uv (`recreate`).

A VCS requirement that names no full commit resolves to whatever its branch says at install
time; the closure records the commit it got, flagged `moving`. The engine's own requirements
are read from its wheel before anything is touched; a moving reference deeper in the closure
is seen once uv has resolved it, and refused there, which rolls the install back."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from mcp_server.environment.closure import Closure, ClosureMember, DirectUrl
from mcp_server.environment.identity import active_requirements
from mcp_server.errors import SetupError

STEP = "check pins"
_PINNED_VCS = re.compile(r"@[0-9a-f]{40}([0-9a-f]{24})?(#|$)")


@dataclass(frozen=True)
class ClosurePolicy:
    """How an install treats the engine's dependency closure."""

    require_pinned: bool = False
    # `recreate`: uv overrides naming every bound member at its bound version or commit.
    overrides: tuple[str, ...] = ()
    # `recreate`: the members installed from their store wheels, and the origin each gets back.
    from_store: tuple[tuple[str, DirectUrl | None], ...] = ()


def _moving_url(url: str) -> bool:
    if url.startswith(("git+", "hg+", "svn+", "bzr+")):
        return _PINNED_VCS.search(url) is None
    return "#sha256=" not in url and "#sha384=" not in url and "#sha512=" not in url


def moving_requirements(requires: tuple[str, ...] | list[str], extras: list[str]) -> list[str]:
    """The engine's active requirements that name a URL without a commit (or hash)."""
    found = []
    for req in active_requirements(requires, extras):
        if req.url and _moving_url(req.url):
            found.append(str(req))
    return found


def refuse_moving(what: list[str], where: str) -> None:
    if not what:
        return
    raise SetupError(
        STEP,
        f"{len(what)} requirement(s){where} resolve from a moving reference (a VCS or URL "
        "requirement naming no commit); --require-pinned refuses them, and nothing was changed",
        "pin each one in the requirement that names it (name @ git+URL@<full commit>), or "
        "install without --require-pinned (the record then names the commit each resolved to)",
        details=what,
    )


def moving_in_closure(closure: Closure) -> list[str]:
    return [f"{name}: {m.origin()}" for name, m in closure.items() if m.moving]


def override(name: str, member: ClosureMember, wheel: Path | None = None) -> str:
    """The requirement that installs exactly this member again (from `wheel`, its wheel in
    the store, when there is one)."""
    d = member.direct_url
    if wheel is not None:
        return f"{name} @ {wheel.resolve().as_uri()}"
    if d is None:
        return f"{name}=={member.version}"
    if d.kind == "vcs" and d.commit_id:
        sub = f"#subdirectory={d.subdirectory}" if d.subdirectory else ""
        return f"{name} @ {d.vcs}+{d.url}@{d.commit_id}{sub}"
    return f"{name} @ {d.url}"


def overrides_for(
    closure: Closure | None, stored: dict[str, Path] | None = None
) -> tuple[str, ...]:
    lines = tuple(
        override(name, m, (stored or {}).get(name)) for name, m in (closure or {}).items()
    )
    for line in lines:  # what uv would read must be a requirement it parses
        try:
            Requirement(line)
        except InvalidRequirement as exc:  # pragma: no cover - built from parsed metadata
            raise SetupError(STEP, f"cannot pin {line!r}: {exc}", "report this") from None
    return lines
