"""Pages of a workspace's listing: the experiment folders in name order, a page of them after
a cursor, and the cursor of the next page.

A cursor says where the next page starts (after which experiment id) and of which workspace's
listing; it is not secret and proves nothing: a page starts after a name, so a walk page by
page sees every experiment that exists throughout exactly once, whatever is added or removed
meanwhile (one added behind the cursor is seen by the next walk). A cursor that does not read,
or was made for another workspace, is refused before anything is read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from pathlib import Path

from mcp_server.errors import InvalidInput, shown
from mcp_server.values import ExperimentId, PageCursor

CURSOR_VERSION = 1
REMEDY = (
    "pass the next_cursor of the previous page of this workspace unchanged, or no cursor to "
    "start again from the first page"
)


def _workspace_tag(workspace: Path) -> str:
    return hashlib.sha256(str(workspace).encode()).hexdigest()[:16]


def make_cursor(workspace: Path, after: str) -> str:
    raw = json.dumps({"v": CURSOR_VERSION, "workspace": _workspace_tag(workspace), "after": after})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_position(workspace: Path, cursor: PageCursor) -> str:
    """The experiment id the page after `cursor` starts after, or a refusal."""

    def refuse(why: str) -> InvalidInput:
        return InvalidInput("list", f"the cursor {shown(cursor)} {why}", REMEDY)

    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError):
        raise refuse("is not a cursor a listing gave (it does not decode)") from None
    if not isinstance(data, dict) or set(data) != {"v", "workspace", "after"}:
        raise refuse("is not a cursor a listing gave")
    if data["v"] != CURSOR_VERSION:
        raise refuse(f"is of format {shown(str(data['v']))}, not {CURSOR_VERSION}")
    if data["workspace"] != _workspace_tag(workspace):
        raise refuse(f"is stale: it was made for another workspace than {workspace}")
    after = data["after"]
    try:
        if isinstance(after, str):
            return str(ExperimentId(after))
    except InvalidInput:
        pass
    raise refuse("names no experiment id to start after")


def experiment_names(root: Path) -> list[str]:
    """The experiment folders of a workspace's state folder, in name order."""
    if not root.is_dir():
        return []
    return sorted(path.name for path in root.iterdir() if path.is_dir())


def page(names: list[str], after: str | None, size: int | None) -> tuple[list[str], str | None]:
    """The names of the page after `after` (all of them without a size), and the last one when
    more follow (the next cursor's position)."""
    rest = [name for name in names if after is None or name > after]
    if size is None or len(rest) <= size:
        return rest, None
    return rest[:size], rest[size - 1]
