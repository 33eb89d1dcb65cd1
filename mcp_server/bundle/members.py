"""Ownership by key inside an entry init writes (a server entry, the engine table).

init owns the keys it wrote, not the entry: a key someone adds (an `env` variable, a name in
Codex's `env_vars`, a client option such as `timeout`) is theirs, kept by every init and never
an edit; a key init wrote and someone changed is. A key is a path of names to a value that is
not a table: `("command",)`, `("env", "FOO")`; a table is only the way to its keys, and so is
a list of names (Codex's `env_vars`), whose every name is a key of its own:
`("env_vars", "UV_INDEX_AUTOML_SETUP_USERNAME")`.

An entry is judged by a view: for each key init recorded or would write now, the digest of
the value there (an absent key left out). The view's digest stands in for the entry's in
ownership.judge, so the states mean what they mean for a whole file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mcp_server.bundle.ownership import InitRecord, InitRecordV1, OwnedItem, OwnedKey, entry_digest

KeyPath = tuple[str, ...]
View = dict[KeyPath, str]  # key -> digest of its value
_ABSENT = object()
NAME_LISTS = frozenset({"env_vars"})  # lists of names, each name owned by whoever added it


def leaves(entry: Mapping[str, Any], prefix: KeyPath = ()) -> dict[KeyPath, Any]:
    """Every key of `entry` with its value; a table is walked into (an empty one has none)."""
    out: dict[KeyPath, Any] = {}
    for name, value in entry.items():
        if isinstance(value, Mapping):
            out.update(leaves(value, (*prefix, name)))
        elif name in NAME_LISTS and isinstance(value, list):
            out.update({(*prefix, name, str(item)): True for item in value})
        else:
            key: KeyPath = (*prefix, name)  # not out[(*...)]: a 3.11 subscript to mypy
            out[key] = value
    return out


def value_at(entry: Any, key: KeyPath) -> Any:
    node = entry
    for depth, name in enumerate(key):
        if isinstance(node, list) and depth and key[depth - 1] in NAME_LISTS:
            return True if name in node and depth == len(key) - 1 else _ABSENT
        if not isinstance(node, Mapping) or name not in node:
            return _ABSENT
        node = node[name]
    return _ABSENT if isinstance(node, Mapping) else node


def view(entry: Mapping[str, Any], keys: Iterable[KeyPath]) -> View:
    """The digests of the values `entry` has at `keys` (the keys it lacks left out)."""
    out: View = {}
    for key in keys:
        value = value_at(entry, key)
        if value is not _ABSENT:
            out[key] = entry_digest(value)
    return out


def wanted_view(entry: Mapping[str, Any]) -> View:
    return {key: entry_digest(value) for key, value in leaves(entry).items()}


def view_digest(keys: View) -> str:
    return entry_digest(sorted([list(key), digest] for key, digest in keys.items()))


def recorded_keys(item: OwnedItem | None) -> View | None:
    return None if item is None else {tuple(k.key): k.sha256 for k in item.keys}


def owned_keys(entry: Mapping[str, Any]) -> list[OwnedKey]:
    """The record's list of the keys init writes in `entry`, with their digests."""
    return [OwnedKey(key=list(k), sha256=d) for k, d in sorted(wanted_view(entry).items())]


def digests(
    current: Any, recorded: View | None, wanted: Mapping[str, Any] | None
) -> tuple[str | None, str | None, str | None]:
    """What ownership.judge compares for an entry: the digests of its view now, of the view
    init recorded, and of what init would write (None: absent, never recorded, to be removed),
    each over the keys init recorded or would write."""
    want = None if wanted is None else wanted_view(wanted)
    keys = set(recorded or ()) | set(want or ())
    if current is None or not isinstance(current, Mapping):  # not a table: all someone's
        have = None if current is None else entry_digest(current)
    else:
        have = view_digest(view(current, keys))
    return (
        have,
        None if recorded is None else view_digest(recorded),
        None if want is None else view_digest(want),
    )


def changed(current: Mapping[str, Any], recorded: View) -> list[str]:
    """The keys init wrote whose value is no longer what it wrote (dotted, for a message)."""
    now = view(current, recorded)
    return [".".join(k) for k in sorted(recorded) if now.get(k) != recorded[k]]


def merged(current: Any, recorded: Iterable[KeyPath], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The entry init writes: everyone else's keys of `current` as they are, the keys init
    recorded and no longer writes taken out, and its own keys set to `wanted`'s."""
    entry = json.loads(json.dumps(current)) if isinstance(current, Mapping) else {}
    for key in recorded:
        _remove(entry, key)
    for key, value in leaves(wanted).items():
        node = entry
        for depth, name in enumerate(key[:-1]):
            if name in NAME_LISTS and depth == len(key) - 2:  # a name in a list of names
                if not isinstance(node.get(name), list):
                    node[name] = []
                if key[-1] not in node[name]:
                    node[name].append(key[-1])
                break
            if not isinstance(node.get(name), dict):
                node[name] = {}
            node = node[name]
        else:
            node[key[-1]] = value
    return entry


def _remove(entry: dict[str, Any], key: KeyPath) -> None:
    node: Any = entry
    for name in key[:-1]:
        holder, node = node, node.get(name) if isinstance(node, dict) else None
        if isinstance(node, list) and name in NAME_LISTS:
            if key[-1] in node:
                node.remove(key[-1])
            if not node:
                del holder[name]
            return
        if not isinstance(node, dict):
            return
    node.pop(key[-1], None)


# --- records of 0.1.0: one digest for the whole entry ---------------------------------------

# The keys 0.1.0 wrote into its entries: its Claude Code entry always held an empty `env`.
RELEASED_KEYS: dict[str, tuple[str, ...]] = {
    ".mcp.json": ("type", "command", "args", "env"),
    ".codex/config.toml": ("command", "args", "startup_timeout_sec", "tool_timeout_sec"),
}
RELEASED_ENGINE_KEYS = ("repository", "subdirectory", "distribution", "requirement")
EDITED_UNDER_0_1_0 = "edited before this record was carried forward"


def released_view(path: str, digest: str, current: Any) -> View:
    """The keys a 0.1.0 record owns in an entry it recorded by one digest: the keys 0.1.0
    wrote, when the entry restricted to them still has that digest (anything else there was
    added by someone); else those keys, each marked edited (no digest matches the mark)."""
    if not isinstance(current, Mapping):
        return {}
    names = RELEASED_KEYS.get(path, RELEASED_ENGINE_KEYS)
    wrote = {n: ({} if n == "env" else current[n]) for n in names if n in current}
    if "env" in names:
        wrote["env"] = {}
    if entry_digest(wrote) == digest:
        return wanted_view(wrote)
    return {(n,): EDITED_UNDER_0_1_0 for n in names if n in current and n != "env"}


def carried_forward(
    old: InitRecordV1, current: Callable[[str, tuple[str, ...]], Any]
) -> InitRecord:
    """A 0.1.0 record in today's format, each entry's keys from what `current(path, key)` (the
    entry in the project now) tells (released_view)."""
    items = []
    for item in old.items:
        keys: View = {}
        if item.key:
            keys = released_view(item.path, item.sha256, current(item.path, tuple(item.key)))
        owned = [OwnedKey(key=list(k), sha256=d) for k, d in sorted(keys.items())]
        items.append(OwnedItem(**item.model_dump(), keys=owned))
    fields = old.model_dump(exclude={"schema_version", "items"})
    return InitRecord(**fields, items=items)
