"""Set one member of a nested JSON object in a file's text, keeping every other byte.

`json.loads` then `json.dumps` would re-indent and re-order a file someone else wrote; here
the text is scanned for the spans of the object members on the way (`json`'s own decoder reads
each value), only the member's value is replaced (or a member inserted after the last one, in
that object's indentation), and the result is parsed again to prove it holds exactly the old
data plus the new member."""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # not in typeshed
from typing import Any

_WHITESPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


class JsonEditError(ValueError):
    """The text is not a JSON object this editor can change without touching anything else."""


@dataclass(frozen=True)
class _Member:
    key: str
    key_start: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class _Object:
    start: int  # the '{'
    end: int  # the '}'
    members: tuple[_Member, ...]


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _expect(text: str, i: int, char: str) -> int:
    if i >= len(text) or text[i] != char:
        raise JsonEditError(f"expected {char!r} at character {i}")
    return i + 1


def _scan_object(text: str, start: int) -> _Object:
    i = _expect(text, start, "{")
    members: list[_Member] = []
    i = _skip(text, i)
    if i < len(text) and text[i] == "}":
        return _Object(start, i, ())
    while True:
        key_start = i
        i = _expect(text, i, '"')
        key, i = scanstring(text, i)
        i = _expect(text, _skip(text, i), ":")
        value_start = _skip(text, i)
        try:
            _, value_end = _DECODER.raw_decode(text, value_start)
        except json.JSONDecodeError as exc:
            raise JsonEditError(str(exc)) from None
        if any(m.key == key for m in members):
            raise JsonEditError(f"the key {key!r} appears twice in one object")
        members.append(_Member(key, key_start, value_start, value_end))
        i = _skip(text, value_end)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
            continue
        _expect(text, i, "}")
        return _Object(start, i, tuple(members))


def _line_indent(text: str, index: int) -> str | None:
    """The whitespace before `index` on its line, or None when something else precedes it."""
    line_start = text.rfind("\n", 0, index) + 1
    prefix = text[line_start:index]
    return prefix if prefix.strip(" \t") == "" else None


def _indent_unit(text: str, top: _Object) -> str:
    """The file's own indentation step, from its first member (two spaces if it has none)."""
    for member in top.members:
        indent = _line_indent(text, member.key_start)
        if indent:
            return indent
    return "  "


def _render(value: Any, indent: str, unit: str, compact: bool) -> str:
    if compact:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _leading(text: str, index: int) -> str:
    """The indentation of the line `index` is on."""
    line_start = text.rfind("\n", 0, index) + 1
    line = text[line_start:index]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _insert(text: str, obj: _Object, key: str, value: Any, unit: str) -> str:
    """`text` with `"key": value` added as the last member of `obj`."""
    if not obj.members:
        outer = _leading(text, obj.start)
        inner = outer + unit
        member = f'"{_escape(key)}": {_render(value, inner, unit, compact=False)}'
        return f"{text[: obj.start]}{{\n{inner}{member}\n{outer}}}{text[obj.end + 1 :]}"
    last = obj.members[-1]
    indent = _line_indent(text, last.key_start)
    compact = indent is None  # the members share a line: so does the new one
    rendered = _render(value, indent or "", unit, compact)
    member = f'"{_escape(key)}": {rendered}'
    glue = ", " if compact else ",\n" + (indent or "")
    return text[: last.value_end] + glue + member + text[last.value_end :]


def _escape(key: str) -> str:
    return json.dumps(key)[1:-1]


def _load_object(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonEditError(f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise JsonEditError("the top level is not a JSON object")
    return data


def set_member(text: str, path: tuple[str, str], value: Any) -> str:
    """`text` (a JSON object) with `path[0]` (an object, created when absent) holding
    `path[1]: value`; every other byte is kept. JsonEditError when that cannot be done."""
    outer_key, key = path
    before = _load_object(text)
    top = _scan_object(text, _skip(text, 0))
    unit = _indent_unit(text, top)
    holder = next((m for m in top.members if m.key == outer_key), None)
    if holder is None:
        new = _insert(text, top, outer_key, {key: value}, unit)
    else:
        if not isinstance(before[outer_key], dict):
            raise JsonEditError(f"{outer_key!r} is not a JSON object")
        inner = _scan_object(text, holder.value_start)
        mine = next((m for m in inner.members if m.key == key), None)
        if mine is None:
            new = _insert(text, inner, key, value, unit)
        else:
            indent = _line_indent(text, mine.key_start)
            rendered = _render(value, indent or "", unit, compact=indent is None)
            new = text[: mine.value_start] + rendered + text[mine.value_end :]
    expected = {**before, outer_key: {**before.get(outer_key, {}), key: value}}
    if json.loads(new) != expected:  # pragma: no cover - a bug here, never a user's file
        raise JsonEditError("the edit would change other members")
    return new


def get_member(text: str, path: tuple[str, str]) -> Any:
    """The value at `path` in a JSON object's text (None when absent); JsonEditError when the
    text is not a JSON object or `path[0]` is not an object."""
    holder = _load_object(text).get(path[0])
    if holder is None:
        return None
    if not isinstance(holder, dict):
        raise JsonEditError(f"{path[0]!r} is not a JSON object")
    return holder.get(path[1])
