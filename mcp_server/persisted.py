"""Strict reading of every file automl-setup persists.

Models keep defaults so code can construct them tersely, but a file on disk is always written
whole (`model_dump`), so a field missing from a file means the file was damaged or edited.
Reading through `load_persisted` therefore requires every field, forbids extra ones, refuses
type coercion (strict mode) and an unknown format version (a `Literal` field), and turns any
failure into a `SetupError` naming the file, the first problem and the remedy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar, get_args

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator

from mcp_server import __build__
from mcp_server.errors import SetupError
from mcp_server.fsutil import read_json_lines

STRICT_READ = "automl_setup_strict_read"


class Persisted(BaseModel):
    """Base of every persisted format: frozen, no extra fields, and every field required when
    read from a file (see `load_persisted`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _every_field_present(cls, data: Any, info: ValidationInfo) -> Any:
        if info.context and info.context.get(STRICT_READ) and isinstance(data, dict):
            missing = [
                field.alias or name for name, field in cls.model_fields.items()
                if (field.alias or name) not in data
            ]  # fmt: skip
            if missing:
                raise ValueError(f"missing field(s) {', '.join(missing)}")
        return data


M = TypeVar("M", bound=BaseModel)


class NewerFormat(SetupError):
    """A file a newer automl-setup wrote, in a format this one does not read: not damaged."""


def describe_error(exc: ValidationError) -> str:
    """The first problem of a validation error in a few words: where and what."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "top level"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def format_version(data: bytes) -> object:
    """The `schema_version` a file declares (None when it is not a JSON object): which model
    reads it strictly."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value.get("schema_version") if isinstance(value, dict) else None


def parse_persisted(model: type[M], data: bytes | dict[str, Any]) -> M:
    """Validate raw JSON bytes or an already parsed object strictly; ValidationError on failure."""
    context = {STRICT_READ: True}
    if isinstance(data, bytes):
        return model.model_validate_json(data, strict=True, context=context)
    return model.model_validate(data, strict=True, context=context)


def load_persisted(
    model: type[M],
    data: bytes | dict[str, Any],
    *,
    what: str,
    path: Path,
    remedy: str,
    line: int | None = None,
) -> M:
    """`parse_persisted`, with a failure refused as `read <what>: <path> is not a valid <what>`."""
    try:
        return parse_persisted(model, data)
    except ValidationError as exc:
        where = f"{path} line {line}" if line is not None else str(path)
        newer = _newer_format(model, data)
        if newer is not None:
            raise NewerFormat(f"read {what}", f"{where} {newer[0]}", newer[1]) from None
        raise SetupError(
            f"read {what}", f"{where} is not a valid {what} ({describe_error(exc)})", remedy
        ) from None


def _newer_format(model: type[BaseModel], data: bytes | dict[str, Any]) -> tuple[str, str] | None:
    """A file in a format newer than this automl-setup reads (a newer automl-setup wrote it):
    the cause, naming the format and the version that wrote it, and the remedy. Such a file is
    left as it is: never read as something else, never rewritten in an older format."""
    field = model.model_fields.get("schema_version")
    known = [v for v in get_args(field.annotation) if isinstance(v, int)] if field else []
    try:
        tree = json.loads(data) if isinstance(data, bytes) else data
    except ValueError:
        return None
    declared = tree.get("schema_version") if isinstance(tree, dict) else None
    if not known or type(declared) is not int or declared <= max(known):
        return None
    writer = _writer(tree)
    by = f" by automl-setup {writer}" if writer else ""
    cause = (
        f"was written in format {declared}{by}, newer than this automl-setup {__build__} "
        f"reads (format {max(known)}); it was left as it is"
    )
    remedy = (
        "read it with the automl-setup that wrote it, or a newer one "
        # A build's commit label (`+g<commit>`) cannot stand in a `>=`.
        f"(`uv tool install 'automl-setup>={Version(writer).public}'`)"
        if writer
        else "read it with the newer automl-setup that wrote it"
    )
    return cause, remedy + "; an older automl-setup never rewrites it in its own format"


def _writer(tree: dict[str, Any]) -> str | None:
    """The automl-setup version a file names as its writer (`tool_version`, at the top or in
    one of its sections), if it names one as a version."""
    for node in (tree, *(v for v in tree.values() if isinstance(v, dict))):
        version = node.get("tool_version")
        if isinstance(version, str) and len(version) <= 100:
            try:  # normalised: no stray whitespace or other text reaches the message
                return str(Version(version))
            except InvalidVersion:
                continue
    return None


def load_persisted_lines(
    model: type[M], path: Path, *, what: str, entry: str, remedy: str
) -> tuple[list[M], int | None]:
    """Every line of the append-only JSON-lines file `what`, read strictly as `model` (a damaged
    `entry` refuses, naming its line), and the number of a torn last line (reported, never
    dropped)."""
    lines = read_json_lines(path, what=what)
    entries = [
        load_persisted(model, raw, what=entry, path=path, remedy=remedy, line=number)
        for number, raw in enumerate(lines.entries, start=1)
    ]
    return entries, lines.torn_line
