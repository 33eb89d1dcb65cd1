"""Reading an experiment's manifest: a bounded read of a regular file, strict YAML (no aliases,
merge keys or duplicate keys), and its experiment id."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from mcp_server.errors import InvalidInput
from mcp_server.values import ExperimentId, ManifestPath

# automl-setup reads at most this much of a manifest (the engine may allow less: the reference
# engine's cap is 1,000,000 bytes, and its `plan` says so).
MAX_MANIFEST_BYTES = 1 << 20


class _ManifestLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and merge keys (an alias bomb expands exponentially)
    and duplicate keys (which would silently keep the last one)."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in a manifest", mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            problem = "merge keys (<<) are not allowed in a manifest"
            if key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node, deep=True)
                try:
                    problem = f"duplicate key {key!r:.100}" if key in seen else ""
                    seen.add(key)
                except TypeError:  # unhashable: the base constructor refuses it
                    problem = ""
            if problem:
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _read_manifest_file(path: Path, limit: int, step: str, remedy: str) -> bytes:
    """At most `limit` bytes of a regular file; anything else (a FIFO, a device, a directory)
    is refused without reading it, and a larger file before parsing it."""

    def refuse(cause: str) -> InvalidInput:
        return InvalidInput(step, cause, remedy)

    try:
        if not stat.S_ISREG(path.stat().st_mode):  # before open: a FIFO would block it
            raise refuse(f"{path} is not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        try:
            info = os.fstat(fd)  # the file opened, which may have been swapped since stat
            if not stat.S_ISREG(info.st_mode):
                raise refuse(f"{path} is not a regular file")
            chunks, size = [], 0
            while size <= limit and (chunk := os.read(fd, min(1 << 16, limit + 1 - size))):
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise refuse(f"cannot read manifest {path}: {exc.strerror}") from None
    if size > limit:
        raise refuse(f"{path} is larger than {limit} bytes")
    return b"".join(chunks)


def read_manifest(path: ManifestPath) -> tuple[Path, bytes, ExperimentId]:
    """(absolute path, bytes, experiment id) of a YAML or JSON manifest."""
    step = "read manifest"
    remedy = ManifestPath.remedy
    manifest = ManifestPath(path).path  # free for a checked value; a plain string is checked
    data = _read_manifest_file(manifest, MAX_MANIFEST_BYTES, step, remedy)
    try:
        parsed = yaml.load(data.decode("utf-8"), Loader=_ManifestLoader)  # noqa: S506 - safe
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        text = str(exc).strip() if not isinstance(exc, RecursionError) else "nested too deeply"
        first = text.splitlines()[0][:200] if text else type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        first += f" (line {mark.line + 1})" if mark is not None else ""
        raise InvalidInput(
            step, f"{manifest} is not valid YAML or JSON: {first}", "fix the manifest"
        ) from None
    experiment_id = (parsed.get("search") or {}) if isinstance(parsed, dict) else {}
    experiment_id = experiment_id.get("experiment_id") if isinstance(experiment_id, dict) else None
    if not isinstance(experiment_id, str):
        raise InvalidInput(
            step,
            f"{manifest} has no string search.experiment_id",
            "check the manifest with the engine's `plan` command",
        )
    return manifest, data, ExperimentId(experiment_id)
