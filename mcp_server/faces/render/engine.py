"""The texts of the engine operations' results (resolve, install, verify, diagnose, repair,
history): the CLI prints them, the MCP tools return them, so both faces show the same words. Each
operation's renderer is named by its row (`faces/registry.py`); rendering happens only in
`faces/render/`."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from mcp_server.environment.diagnose import Diagnosis
from mcp_server.environment.verify import VerifyReport
from mcp_server.operations import (
    BindingCheck,
    BranchResolution,
    InstallHistory,
    ProvenanceReport,
    RepairResult,
)

if TYPE_CHECKING:  # a command imports the area of its own result only (operations.Operation)
    from mcp_server.environment.install import InstallResult
    from mcp_server.environment.records import HistoryEntry, InstallRecord


def resolution_text(res: BranchResolution) -> str:
    return (
        f"{res.ref} -> {res.commit}\n  repository: {res.repository}\n"
        f"  {res.profile_source.describe()}"
    )


def closure_lines(rec: InstallRecord) -> list[str]:
    """The closure in one line, and each dependency that did not come from an index by its
    origin: a VCS one by the commit it resolved to, flagged when its requirement named none."""
    if rec.closure is None:
        return []
    lines = [f"  closure:  {len(rec.closure)} distributions recorded (version, RECORD, origin)"]
    for name, member in rec.closure.items():
        if member.direct_url is not None:
            flag = "  [resolved from a moving reference]" if member.moving else ""
            lines.append(f"  depends:  {name} {member.version} from {member.origin()}{flag}")
    return lines


def install_text(result: InstallResult) -> str:
    from mcp_server.faces.render.store import artifact_origin, source_lines

    rec = result.record
    verb = "installed" if result.status == "installed" else "already installed (unchanged)"
    lines = [
        f"{verb}: {rec.build.distribution} {rec.build.version} {artifact_origin(rec)}",
        *source_lines(rec),
        f"  wheel:    {rec.build.wheel_filename} sha256 {rec.build.wheel_sha256}",
        f"  into:     {rec.install.environment}",
        f"  identity: {rec.identity_digest}",
        f"  verified: {result.verify.files_checked} files match RECORD",
        f"  {result.profile_source.describe()}",
    ]
    lines += closure_lines(rec)
    replaced = rec.source is None or result.previous_commit != rec.source.commit
    if result.previous_commit and replaced:
        lines.append(f"  replaced: commit {result.previous_commit}")
    if result.restored:
        n = len(result.restored)
        lines.append(
            f"  repaired: {n} modified file{'s' if n > 1 else ''} of the same build reinstalled "
            f"({', '.join(result.restored)})"
        )
    if result.repaired:
        lines.insert(0, f"repair: {result.repaired}")
    return "\n".join(lines)


def verify_text(report: VerifyReport) -> str:
    lines = [f"{report.status}: {report.distribution} in {report.environment}"]
    if report.commit:
        lines.append(f"  commit: {report.commit} ({report.requested_ref or 'by commit'})")
    if report.status == "verified":
        lines.append(f"  {report.files_checked} files match RECORD; identity digest recomputes")
    if report.watched:
        found = (f"{name} {version or '(absent)'}" for name, version in report.watched.items())
        lines.append(f"  watched: {', '.join(found)}")
    lines += [f"  differs: {d.describe()}" for d in report.differences]
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)


def mismatch_remedy(report: VerifyReport) -> str:
    """Reinstalling the recorded build over a modified one repairs it (install says so); edited
    dependency files are restored with their uv cache entries (`restore_commands`)."""
    if report.restore_commands and all(
        d.field.startswith("bytecode ") or (d.field.startswith("closure.") and ".file " in d.field)
        for d in report.differences
    ):  # only bytecode and dependency files: a reinstall of the engine would not touch them
        return _restore_remedy(report)
    python = shlex.quote(report.environment)
    if report.commit is None:
        text = (
            f"reinstall the reviewed wheel: automl-setup install --wheel FILE --sha256 SHA256 "
            f"--python {python}"
        )
    else:
        text = (
            f"reinstall the recorded build over it: automl-setup install --commit "
            f"{report.commit} --python {python} (same engine profile); or install another build"
        )
    return f"{text}; and {_restore_remedy(report)}" if report.restore_commands else text


def _restore_remedy(report: VerifyReport) -> str:
    fields = [d.field for d in report.differences]
    what = []
    if any(f.startswith("bytecode ") for f in fields):
        what.append(
            "remove the engine's bytecode that is not compiled from its source (Python then "
            "runs the source; automl-setup never writes bytecode there)"
        )
    if any(f.startswith("closure.") for f in fields):
        what.append(
            "restore the edited dependencies, in the environment and in uv's cache (their "
            "files are linked from it, so the cache entry holds the same edit), with the "
            "UV_CACHE_DIR the install ran with"
        )
    steps = "; then ".join(f"`{command}`" for command in report.restore_commands)
    return f"{' and '.join(what)}: {steps}"


def provenance_text(report: ProvenanceReport) -> str:
    """`verify`: the environment's report, the comparison with an experiment's binding when
    one was asked, and the diagnosis when nothing is installed."""
    parts = [f"{verify_text(report)}\n  {report.profile_source.describe()}"]
    if report.experiment is not None:
        parts.append(binding_text(report.experiment, report.environment))
    if report.diagnosis is not None:
        parts.append(diagnosis_text(report.diagnosis))
    text = "\n\n".join(parts)
    if report.status == "cannot-start":
        return text + f"\n  remedy: {cannot_start_remedy(report)}"
    return text + f"\n  remedy: {mismatch_remedy(report)}" if report.status == "mismatch" else text


def cannot_start_remedy(report: VerifyReport) -> str:
    """Every recorded file matches, yet the engine does not import: something verify cannot
    see (bytecode cut short by a full disk, a changed base interpreter)."""
    python = shlex.quote(report.environment)
    reinstall = (
        f"automl-setup install --commit {report.commit} --python {python}"
        if report.commit
        else f"automl-setup install --wheel FILE --sha256 SHA256 --python {python}"
    )
    return (
        "read the exception above; bytecode cut short or stale (a full disk, another writer: "
        "automl-setup writes it only at install) goes with Python's caches (Python then compiles "
        "in memory; the next install writes them again): "
        f"`find {python}/lib -name __pycache__ -prune -exec rm -rf {{}} +`; a damaged install "
        f"with `{reinstall}` (same engine profile); then verify again"
    )


def binding_text(check: BindingCheck, environment: str) -> str:
    if check.matches:
        return (
            f"experiment {check.experiment_id}: {environment} holds exactly the bound engine "
            f"(commit {check.bound_commit}, identity {check.bound_identity_digest})"
        )
    lines = [
        f"experiment {check.experiment_id}: the engine in {environment} is not the build it is "
        f"bound to ({len(check.differences)} fields differ; bound commit {check.bound_commit})"
    ]
    lines += [f"  differs: {d.describe()}" for d in check.differences]
    lines.append("  recreate the bound engine in a separate environment and resume there:")
    lines += [f"    {command}" for command in check.recreate_commands]
    return "\n".join(lines)


def history_text(history: InstallHistory) -> str:
    where, entries = history.environment, history.entries
    lines = [f"install history of {where}:"] if entries else [f"no installs recorded in {where}"]
    lines += [
        f"  {e.time}  {e.event:<11} {built_from(e)}" + (f"  {e.detail}" if e.detail else "")
        for e in entries
    ]
    if history.torn_line:
        lines.append(
            f"  warning: line {history.torn_line} of the history is torn (an interrupted write)"
        )
    return "\n".join(lines)


def built_from(entry: HistoryEntry) -> str:
    """A history line's build: its commit and ref, or the reviewed wheel (it has no commit)."""
    if entry.commit is None:
        wheel = entry.wheel_sha256[:12] if entry.wheel_sha256 else "(sha256 not recorded)"
        return f"reviewed wheel {wheel}"
    return f"{entry.commit[:12]}  {entry.requested_ref or '(by commit)'}"


def repair_text(result: RepairResult) -> str:
    return result.done


def diagnosis_text(d: Diagnosis) -> str:
    lines = [
        f"environment: {d.environment}",
        d.profile_source.describe(),
        f"engine status: {d.record_status}",
    ]
    lines += [f"  - {f}" for f in d.findings]
    if d.install_commands:
        lines.append("install the core from source with one of:")
    lines += [f"  {name}: {command}" for name, command in d.install_commands.items()]
    return "\n".join(lines)
