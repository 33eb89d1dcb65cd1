"""The text of `automl-setup init` and `init --check`."""

from __future__ import annotations

import shlex

from mcp_server.bundle.init import InitResult
from mcp_server.bundle.ownership import State


def init_text(result: InitResult) -> str:
    lines = [
        f"project: {result.project}",
        f"bundle:  automl-setup {result.bundle_version}, skills {', '.join(result.skills)} "
        f"(sha256 {result.bundle_sha256[:16]}…, from {result.bundle_origin})",
    ]
    if result.mcp_command is not None:
        lines.append(f"server:  {shlex.join(result.mcp_command)}")
    if result.check:
        return "\n".join(lines + _check_lines(result))
    changed = [i for i in result.items if i.action not in ("unchanged", "kept")]
    lines += [f"  {i.action:<9} {i.path}{_key(i.key)}" for i in changed]
    kept = sum(i.action == "kept" for i in result.items)
    summary = f"{len(changed)} changed" if changed else "already current: nothing written"
    extra = f", {kept} recorded earlier left as they are" if kept else ""
    lines.append(f"init: {summary}{extra}; record {result.record}")
    return "\n".join(lines)


def _key(key: list[str]) -> str:
    return f" [{'.'.join(key)}]" if key else ""


def _check_lines(result: InitResult) -> list[str]:
    if result.ok:
        return [f"init --check: ok, {len(result.items)} owned files and entries current"]
    if not result.record_found:  # every file would be new: a list of them says nothing more
        return ["init --check: init has not run here (no record): run automl-setup init"]
    bad = [i for i in result.items if i.state != State.CURRENT]
    lines = [f"  {i.state.value:<8} {i.path}{_key(i.key)}: {i.detail}" for i in bad]
    if any(i.state.refused for i in bad):
        return [
            *lines,
            f"init --check: {len(bad)} not current; init will not overwrite what was edited or "
            "is someone else's (see above): move a local change to a file of your own, or "
            "delete the file to have init write it again",
        ]
    return [*lines, f"init --check: {len(bad)} not current; run automl-setup init to update"]
