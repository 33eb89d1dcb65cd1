"""Texts of the engine's source: the branches of its repository, and the effective settings
(`automl-setup config show`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_server.source.config import PROFILE_ENV, EffectiveSettings

if TYPE_CHECKING:  # `config show` imports this module; only `branches` lists branches
    from mcp_server.source.branches import BranchListing


def branches_text(listing: BranchListing) -> str:
    where = listing.repository
    if listing.with_subdirectory is None:
        lines = [f"branches of {where}:"]
    else:
        lines = [f"branches of {where} whose head holds {listing.with_subdirectory}:"]
    width = max((len(head.branch) for head in listing.branches), default=0)
    lines += [f"  {head.branch:<{width}}  {head.commit}" for head in listing.branches]
    if not listing.branches:
        lines.append("  (none)")
    if listing.without_subdirectory:
        lines.append(f"  ({listing.without_subdirectory} other branches lack it)")
    lines.append(f"  {listing.profile_source.describe()}")
    return "\n".join(lines)


def settings_text(settings: EffectiveSettings) -> str:
    engine = settings.engine
    return "\n".join(
        [
            f"searched from: {settings.start}",
            f"project file:  {settings.project_file or '(none found)'}",
            f"{PROFILE_ENV}: {settings.profile_env or '(not set)'}",
            f"engine:        {engine.distribution} {engine.requirement} from {engine.repository}"
            f" ({engine.subdirectory})",
            f"  from:        {engine.source}",
            f"python:        {settings.python.value or '(none)'}  ({settings.python.source})",
            f"workspace:     {settings.workspace.value or '(none)'}  ({settings.workspace.source})",
            f"wheel store:   {settings.store.value}  ({settings.store.source})",
            f"stall timeout: {settings.stall_timeout.value} s  ({settings.stall_timeout.source})",
            f"precedence: flags > --profile FILE > ${PROFILE_ENV} > project file > built-in "
            "default",
        ]
    )
