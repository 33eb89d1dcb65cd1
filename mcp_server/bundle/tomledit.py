"""Set one table of a TOML file's text, keeping every other key, comment and blank line.

tomlkit parses TOML into a document that remembers its own text; the table is replaced (or
added under its parent, which is created as a super-table header when absent), and the result
is checked twice: it holds exactly the old data plus the table, and with that table taken out
of both, the old and the new text are the same."""

from __future__ import annotations

import difflib
from typing import Any

import tomlkit
from tomlkit.container import Container
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable, Table
from tomlkit.toml_document import TOMLDocument


class TomlEditError(ValueError):
    """The text is not TOML this editor can change without touching anything else."""


def _parse(text: str) -> TOMLDocument:
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise TomlEditError(f"not valid TOML ({exc})") from None


def _parent(doc: TOMLDocument, path: tuple[str, ...], create: bool) -> Container | Table | None:
    node: Any = doc
    for depth, key in enumerate(path[:-1]):
        if key not in node:
            if not create:
                return None
            # A header-only parent: `[a.b]` is written, never a bare `[a]` line.
            node[key] = tomlkit.table(is_super_table=True)
        node = node[key]
        if isinstance(node, InlineTable) or not isinstance(node, Table | Container):
            dotted = ".".join(path[: depth + 1])
            raise TomlEditError(f"{dotted} is not a table (an inline table or a value)")
    return node  # type: ignore[no-any-return]


def get_table(text: str, path: tuple[str, ...]) -> dict[str, Any] | None:
    """The plain data of the table at `path` (None when absent)."""
    parent = _parent(_parse(text), path, create=False)
    if parent is None or path[-1] not in parent:
        return None
    value = parent[path[-1]]
    if not isinstance(value, Table | InlineTable):
        raise TomlEditError(f"{'.'.join(path)} is not a table")
    return dict(value.unwrap())


def _without(text: str, path: tuple[str, ...]) -> str:
    doc = _parse(text)
    parent = _parent(doc, path, create=False)
    if parent is not None and path[-1] in parent:
        del parent[path[-1]]
    return tomlkit.dumps(doc)


def _keeps(old: str, new: str, path: tuple[str, ...], replaced: bool) -> bool:
    """Everything but the table is as it was: a new table only adds lines (every old line is
    kept, in order); a replaced one leaves the same text once it is taken out of both."""
    if replaced:
        return _without(new, path) == _without(old, path)
    opcodes = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines()).get_opcodes()
    return all(tag in ("equal", "insert") for tag, *_ in opcodes)


def set_table(text: str, path: tuple[str, ...], values: dict[str, Any]) -> str:
    """`text` with the table at `path` holding exactly `values`; TomlEditError when the file is
    not TOML, a parent is not a table, or the edit would change anything else."""
    if text and not text.endswith("\n"):
        text += "\n"  # the last line ends before anything is added after it
    doc = _parse(text)
    before = doc.unwrap()
    parent = _parent(doc, path, create=True)
    assert parent is not None  # created on the way
    table = tomlkit.table()
    for key, value in values.items():
        table[key] = value
    replaced = path[-1] in parent
    if replaced:
        if not isinstance(parent[path[-1]], Table):
            raise TomlEditError(f"{'.'.join(path)} is not a table")
        parent[path[-1]] = table
    else:
        parent.append(path[-1], table)
        table.add(tomlkit.nl())  # a blank line between it and a table that follows
    new = tomlkit.dumps(doc)
    if new.endswith("\n\n") and not text.endswith("\n\n"):
        new = new[:-1]  # it came last: no blank line at the end of the file
    expected = before
    node = expected
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = values
    if _parse(new).unwrap() != expected or not _keeps(text, new, path, replaced):
        raise TomlEditError(f"adding [{'.'.join(path)}] would change other parts of the file")
    return new
