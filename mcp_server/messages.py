"""The human-readable texts of results: the CLI prints them, the MCP tools return them.

One function per result, so both faces show the same words."""

from __future__ import annotations

from mcp_server.diagnose import Diagnosis
from mcp_server.experiments import ExperimentListing, StartedEngine, format_status
from mcp_server.install import InstallResult
from mcp_server.provenance import HistoryEntry, VerifyReport


def resolution_text(ref: str, commit: str, repository: str) -> str:
    return f"{ref} -> {commit}\n  repository: {repository}"


def install_text(result: InstallResult) -> str:
    rec = result.record
    verb = "installed" if result.status == "installed" else "already installed (unchanged)"
    lines = [
        f"{verb}: {rec.build.distribution} {rec.build.version} from {rec.source.repository}",
        f"  ref:      {rec.source.requested_ref or '(by commit)'}",
        f"  commit:   {rec.source.commit}",
        f"  subtree:  {rec.source.subtree_id} ({rec.source.subdirectory})",
        f"  wheel:    {rec.build.wheel_filename} sha256 {rec.build.wheel_sha256}",
        f"  into:     {rec.install.environment}",
        f"  identity: {rec.identity_digest}",
        f"  verified: {result.verify.files_checked} files match RECORD",
    ]
    if result.previous_commit and result.previous_commit != rec.source.commit:
        lines.append(f"  replaced: commit {result.previous_commit}")
    if result.repaired:
        lines.insert(0, f"repair: {result.repaired}")
    return "\n".join(lines)


def verify_text(report: VerifyReport) -> str:
    lines = [f"{report.status}: {report.distribution} in {report.environment}"]
    if report.commit:
        lines.append(f"  commit: {report.commit} ({report.requested_ref or 'by commit'})")
    if report.status == "verified":
        lines.append(f"  {report.files_checked} files match RECORD; identity digest recomputes")
    lines += [
        f"  differs: {d.field}: recorded {d.recorded}, found {d.found}" for d in report.differences
    ]
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)


def history_text(entries: list[HistoryEntry], torn: int | None, where: str) -> str:
    lines = [f"install history of {where}:"] if entries else [f"no installs recorded in {where}"]
    lines += [
        f"  {e.time}  {e.event:<11} {e.commit[:12]}  {e.requested_ref or '(by commit)'}"
        + (f"  {e.detail}" if e.detail else "")
        for e in entries
    ]
    if torn:
        lines.append(f"  warning: line {torn} of the history is torn (an interrupted write)")
    return "\n".join(lines)


def diagnosis_text(d: Diagnosis) -> str:
    lines = [f"environment: {d.environment}", f"engine status: {d.record_status}"]
    lines += [f"  - {f}" for f in d.findings]
    lines.append("install the core from source with one of:")
    lines += [f"  {name}: {command}" for name, command in d.install_commands.items()]
    return "\n".join(lines)


def started_text(started: StartedEngine) -> str:
    verb = "launched" if started.action == "launch" else "resumed"
    lines = [f"{verb} {started.experiment_id} on engine commit {started.engine_commit}"]
    if started.detached:
        lines.append(f"  pid {started.pid} (detached); log: {started.log_path}")
    else:
        lines.append(f"  engine exited with code {started.exit_code}; log: {started.log_path}")
    lines.append(f"  binding: {started.binding_path}")
    return "\n".join(lines)


def listing_text(listing: ExperimentListing) -> str:
    lines = [format_status(s) for s in listing.experiments]
    lines += [f"unreadable: {problem}" for problem in listing.unreadable]
    return "\n".join(lines) or f"no experiments in {listing.workspace}"
