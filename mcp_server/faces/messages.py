"""The human-readable texts of results: the CLI prints them, the MCP tools return them.

One function per result, so both faces show the same words; `render` and `exit_code` map an
operation's result to its text and to the command line's exit code. Rendering happens only here.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from mcp_server.environment.diagnose import Diagnosis
from mcp_server.environment.verify import VerifyReport
from mcp_server.errors import ExitCode
from mcp_server.operations import (
    BindingCheck,
    BranchResolution,
    InstallHistory,
    ProvenanceReport,
    RepairResult,
    load_named,
)

if TYPE_CHECKING:  # a command imports the area of its own result only (operations.Operation)
    from mcp_server.environment.install import InstallResult
    from mcp_server.environment.records import InstallRecord
    from mcp_server.experiments.started import StartedEngine
    from mcp_server.experiments.status import ExperimentListing, ExperimentStatus


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
    from mcp_server.faces.text_store import artifact_origin, source_lines

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
    """Reinstalling the recorded build over a modified one repairs it (install says so)."""
    python = shlex.quote(report.environment)
    if report.commit is None:
        return (
            f"reinstall the reviewed wheel: automl-setup install --wheel FILE --sha256 SHA256 "
            f"--python {python}"
        )
    return (
        f"reinstall the recorded build over it: automl-setup install --commit {report.commit} "
        f"--python {python} (same engine profile); or install another build"
    )


def provenance_text(report: ProvenanceReport) -> str:
    """`verify`: the environment's report, the comparison with an experiment's binding when
    one was asked, and the diagnosis when nothing is installed."""
    parts = [f"{verify_text(report)}\n  {report.profile_source.describe()}"]
    if report.experiment is not None:
        parts.append(binding_text(report.experiment, report.environment))
    if report.diagnosis is not None:
        parts.append(diagnosis_text(report.diagnosis))
    text = "\n\n".join(parts)
    return text + f"\n  remedy: {mismatch_remedy(report)}" if report.status == "mismatch" else text


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
        f"  {e.time}  {e.event:<11} {e.commit[:12]}  {e.requested_ref or '(by commit)'}"
        + (f"  {e.detail}" if e.detail else "")
        for e in entries
    ]
    if history.torn_line:
        lines.append(
            f"  warning: line {history.torn_line} of the history is torn (an interrupted write)"
        )
    return "\n".join(lines)


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


def started_text(started: StartedEngine) -> str:
    verb = "launched" if started.action == "launch" else "resumed"
    lines = [f"{verb} {started.experiment_id} on engine commit {started.engine_commit}"]
    if started.detached:
        lines.append(f"  pid {started.pid} (detached); log: {started.log_path}")
    else:
        lines.append(f"  engine exited with code {started.exit_code}; log: {started.log_path}")
    lines.append(f"  binding: {started.binding_path}")
    return "\n".join(lines)


def format_status(status: ExperimentStatus) -> str:
    best = status.best or {}
    value = best.get("value")
    lines = [
        f"{status.experiment_id}: {status.state}"
        + (" (controller running)" if status.controller_running else ""),
        f"  trials done: {status.trials_done if status.trials_done is not None else '?'}"
        f" of {status.planned_trials if status.planned_trials is not None else '?'} planned",
        f"  best: {value if value is not None else '-'} {json.dumps(best.get('params', {}))}",
        f"  engine: {status.bound_commit} ({status.bound_ref or 'by commit'})"
        f" in {status.bound_environment}",
    ]
    if status.last_attempt:
        a = status.last_attempt
        what = (
            f"engine exited with code {a.exit_code}"
            if a.action == "exit"
            else f"{a.action} {a.outcome}"
        )
        lines.append(f"  last attempt: #{a.attempt} {what} at {a.time}")
    from mcp_server.faces.text_experiments import trials_table

    lines += trials_table(status.trials)
    if status.resume_command:
        lines.append(f"  resume: {status.resume_command}")
    lines += [f"  note: {n}" for n in status.notes]
    return "\n".join(lines)


def listing_text(listing: ExperimentListing) -> str:
    lines = [format_status(s) for s in listing.experiments]
    lines += [f"unreadable: {problem}" for problem in listing.unreadable]
    return "\n".join(lines) or f"no experiments in {listing.workspace}"


# --------------------------------------------------------------------------------------------
# By operation (the names of `operations.OPERATIONS`)

# A renderer of another module is named "module:function" and imported when it renders.
RENDER: dict[str, Callable[[Any], str] | str] = {
    "resolve": resolution_text,
    "install": install_text,
    "verify": provenance_text,
    "diagnose": diagnosis_text,
    "repair": repair_text,
    "history": history_text,
    "launch": started_text,
    "resume": started_text,
    "status": format_status,
    "list": listing_text,
    "branches": "mcp_server.faces.text_source:branches_text",
    "stop": "mcp_server.faces.text_experiments:stop_text",
    "logs": "mcp_server.faces.text_experiments:logs_text",
    "report": "mcp_server.faces.text_report:report_text",
    "store": "mcp_server.faces.text_store:store_text",
    "recreate": "mcp_server.faces.text_store:recreate_text",
    "lock": "mcp_server.faces.text_store:lock_text",
    "slurm watch": "mcp_server.faces.text_slurm_watch:tick_text",
    "slurm watch register": "mcp_server.faces.text_slurm_watch:registration_text",
    "slurm submit": "mcp_server.faces.text_slurm:submitted_text",
    "slurm status": "mcp_server.faces.text_slurm:slurm_status_text",
    "slurm cancel": "mcp_server.faces.text_slurm:cancelled_text",
}


def render(operation: str, result: BaseModel) -> str:
    renderer: Callable[[Any], str] = load_named(RENDER[operation])
    return renderer(result)


def exit_code(operation: str, result: Any) -> int:
    """The command line's exit code for operation `operation`'s result (a refusal never gets
    here: it raised). By operation, so that no other area's result type is imported."""
    if isinstance(result, VerifyReport):  # ProvenanceReport included
        return int(result.exit_code)
    if isinstance(result, Diagnosis):
        return int(ExitCode.OK if result.healthy else ExitCode.REFUSED)
    if operation in ("launch", "resume"):
        return int(result.exit_code or 0)  # a foreground engine's own exit code
    if operation == "stop":
        return int(ExitCode.OK if result.stopped else ExitCode.REFUSED)
    if operation in ("slurm watch", "store"):  # a watch tick's error receipt: 1
        return int(result.exit_code)
    if operation == "list":
        return int(ExitCode.REFUSED if result.unreadable else ExitCode.OK)
    return int(ExitCode.OK)
