"""The identity of an engine build: which fields are identity, their digest, the environment's
fingerprint (Python, platform, dependency versions) and field-level differences.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from mcp_server.environment.closure import Closure, closure_identity, parsed_requirements
from mcp_server.environment.probe import WATCHED_PACKAGES, Probe
from mcp_server.environment.records import (
    BuildIdentity,
    EnvironmentInfo,
    FieldDiff,
    SourceIdentity,
)


def identity_fields(
    source: SourceIdentity | None,
    build: BuildIdentity,
    environment: EnvironmentInfo,
    closure: Closure | None = None,
) -> dict[str, Any]:
    """The resume-relevant fields. The requested ref, paths and times are not identity: the
    same commit installed through another branch name is the same engine build. A reviewed
    wheel has no source: `source` is null, which is how its identity says what it is. The
    closure (each member's version, RECORD digest and origin) is identity; a record or binding
    of a format before it has none, and its digest is what it always was."""
    fields = {
        "source": source.model_dump(exclude={"requested_ref"}) if source else None,
        "build": build.model_dump(),
        "environment": environment.model_dump(),
    }
    if closure is not None:
        fields["closure"] = closure_identity(closure)
    return fields


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def compute_identity_digest(
    source: SourceIdentity | None,
    build: BuildIdentity,
    environment: EnvironmentInfo,
    closure: Closure | None = None,
) -> str:
    fields = identity_fields(source, build, environment, closure)
    return hashlib.sha256(canonical_json(fields)).hexdigest()


def closure_digest(closure: Closure | None) -> str | None:
    """sha256 of the closure's identity alone (every member, version, files, origin): one
    value to compare closures by, outside automl-setup (a tracker's tag); None when none was
    recorded."""
    if closure is None:
        return None
    return hashlib.sha256(canonical_json(closure_identity(closure))).hexdigest()


def flatten(value: Any, prefix: str = "") -> dict[str, str | None]:
    """Nested dict -> {'a.b': 'str'} for field-level comparisons."""
    if isinstance(value, dict):
        out: dict[str, str | None] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: None if value is None else str(value)}


def diff_fields(recorded: dict[str, Any], found: dict[str, Any]) -> list[FieldDiff]:
    left, right = flatten(recorded), flatten(found)
    return [
        FieldDiff(field=key, recorded=left.get(key), found=right.get(key))
        for key in sorted(set(left) | set(right))
        if left.get(key) != right.get(key)
    ]


CLOSURE_NOT_RECORDED = (
    "the engine's dependency closure was not recorded (a record or binding made before "
    "closure recording): only its direct dependencies' versions are compared"
)


def closure_differences(recorded: Closure, found: Closure) -> list[FieldDiff]:
    """Field by field, `closure.<name>.<field>`; a member added or removed is one line,
    `closure.<name>`, its version on one side and `absent` on the other."""
    diffs = [
        FieldDiff(
            field=f"closure.{name}",
            recorded=recorded[name].version if name in recorded else "absent",
            found=found[name].version if name in found else "absent",
        )
        for name in sorted(set(recorded) ^ set(found))
    ]
    both = sorted(set(recorded) & set(found))
    left = {"closure": {n: recorded[n].identity() for n in both}}
    right = {"closure": {n: found[n].identity() for n in both}}
    for name in both:  # a record's digest of either kind names the same files
        if found[name].record_matches(recorded[name].record_sha256):
            right["closure"][name]["record_sha256"] = recorded[name].record_sha256
    return sorted(diffs + diff_fields(left, right), key=lambda d: d.field)


def environment_info(probe: Probe, direct_dependencies: list[str]) -> EnvironmentInfo:
    return EnvironmentInfo(
        python_version=probe.python_version,
        implementation=probe.implementation,
        platform=probe.platform,
        dependencies={name: probe.versions.get(name) for name in sorted(direct_dependencies)},
        watched={name: probe.versions.get(name) for name in WATCHED_PACKAGES},
        torch_cuda=probe.torch_cuda if "torch" in probe.versions else None,
    )


def active_requirements(
    requires: tuple[str, ...] | list[str], extras: list[str] | None = None
) -> list[Requirement]:
    """The engine's requirements, except those of extras not installed. Requirements behind
    other markers are kept."""
    active = []
    for req in parsed_requirements(requires):
        if (
            req.marker is None
            or "extra" not in str(req.marker)
            or any(req.marker.evaluate({"extra": extra}) for extra in extras or [])
        ):
            active.append(req)
    return active


def direct_dependency_names(
    requires: tuple[str, ...] | list[str], extras: list[str] | None = None
) -> list[str]:
    """Canonical names of the active requirements: their versions are recorded (null if
    absent)."""
    return sorted({canonicalize_name(req.name) for req in active_requirements(requires, extras)})
