"""Which experiments are bound to a build: a binding against `list`'s filters (a commit prefix,
an identity digest prefix, a member of the bound closure). An experiment whose binding cannot
say (unreadable, or recorded before the closure was) is never silently left out: it is named
as undecided, so "none is bound to this commit" is only said when every binding was read."""

from __future__ import annotations

from pathlib import Path

from mcp_server.errors import SetupError
from mcp_server.experiments.binding import Binding, read_binding
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.requests import ListQuery
from mcp_server.values import ExperimentId


def binding_matches(binding: Binding, query: ListQuery) -> bool | None:
    """Whether `binding` is of the build the filters name; None when it cannot say (a closure
    filter on a binding recorded before closures were)."""
    engine = binding.engine
    if query.bound_commit is not None and not (
        engine.source is not None and engine.source.commit.startswith(query.bound_commit)
    ):
        return False
    if query.identity_digest is not None and not engine.identity_digest.startswith(
        query.identity_digest
    ):
        return False
    wanted = query.closure_member
    if wanted is not None:
        if engine.closure is None:
            return None
        member = engine.closure.get(wanted.name)
        if member is None or (wanted.version is not None and member.version != wanted.version):
            return False
    return True


def bound_to(query: ListQuery, where: Path, names: list[str]) -> tuple[list[str], list[str]]:
    """The names of `where` whose binding matches, and `name: why` for each that cannot say."""
    kept, undecided = [], []
    for name in names:
        try:
            binding = read_binding(ExperimentFiles(where, ExperimentId(name)))
        except SetupError as exc:
            undecided.append(f"{name}: {exc.message} (so it may be bound to that build)")
            continue
        verdict = binding_matches(binding, query)
        if verdict is None:
            undecided.append(
                f"{name}: its binding predates closure recording, so it cannot say whether "
                f"its closure held {query.closure_member}"
            )
        elif verdict:
            kept.append(name)
    return kept, undecided
