"""Texts of the wheel store and recreate results, and the lines that say which kind of
artifact an install record holds (a source build or a reviewed wheel)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_server.environment.records import InstallRecord

if TYPE_CHECKING:  # install's text uses the first two functions: it imports no experiments
    from mcp_server.experiments.lock import LockResult
    from mcp_server.experiments.recreate import RecreateResult
    from mcp_server.experiments.storeops import StoreReport


def artifact_origin(rec: InstallRecord) -> str:
    if rec.source is None:
        return "(reviewed wheel)"
    return f"from {rec.source.repository}"


def source_lines(rec: InstallRecord) -> list[str]:
    if rec.source is None:
        return ["  origin:   reviewed-wheel (no source: installed by its sha256)"]
    return [
        f"  ref:      {rec.source.requested_ref or '(by commit)'}",
        f"  commit:   {rec.source.commit}",
        f"  subtree:  {rec.source.subtree_id} ({rec.source.subdirectory})",
    ]


def store_text(report: StoreReport) -> str:
    lines = [f"wheel store {report.root}: {len(report.entries)} entries ({report.action})"]
    for e in report.entries:
        what = (
            f"{e.problem}"
            if e.state == "damaged"
            else f"{e.wheel_filename} {e.origin}"
            + (f" commit {e.commit[:12]}" if e.commit else "")
            + (f" (packed from {e.member_of})" if e.member_of else "")
        )
        lines.append(f"  {e.state:8} {e.sha256[:16]}  {what}")
    return "\n".join(lines)


def recreate_text(result: RecreateResult) -> str:
    rec = result.install.record
    return "\n".join(
        [
            f"recreated the engine of {result.experiment_id} in {rec.install.environment} "
            f"(wheel from the {'store' if result.wheel_from == 'store' else 'rebuilt commit'})",
            f"  wheel:    {rec.build.wheel_filename} sha256 {rec.build.wheel_sha256}",
            f"  identity: {rec.identity_digest} (matches the binding)",
            f"  closure:  {len(result.members_from_store)} members from the store, "
            f"{len(result.members_from_elsewhere)} from their index or repository",
            *(f"    {m}" for m in result.members_from_elsewhere),
            f"  resume:   {result.resume_command}",
        ]
    )


def lock_text(result: LockResult) -> str:
    verb = "wrote" if result.written else "already there (the same bytes)"
    lines = [
        f"{verb}: {result.path}",
        f"  {result.packages} packages; the engine by its wheel {result.engine_wheel_sha256}",
        *(f"  vcs: {v}" for v in result.vcs),
        f"  sha256: {result.sha256}",
        f"  install it into a new environment: uv pip sync {result.path} --python NEW_ENV",
    ]
    return "\n".join(lines)
