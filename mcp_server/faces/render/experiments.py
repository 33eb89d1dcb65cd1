"""The texts of the experiment operations' results: a started engine (launch, resume), a status
and its trials table, a listing, a stop, a log tail."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a launch renders without importing status, stop or logs
    from mcp_server.experiments.logs import LogTail
    from mcp_server.experiments.started import StartedEngine
    from mcp_server.experiments.status import ExperimentListing, ExperimentStatus
    from mcp_server.experiments.stop import StopResult
    from mcp_server.experiments.trials import Trial
    from mcp_server.tracking.track import TrackResult


def trials_table(trials: list[Trial]) -> list[str]:
    """One line per trial: index, state, metric value, params."""
    if not trials:
        return []
    lines = [f"  {'trial':>5}  {'state':<11}  {'metric':>12}  params"]
    for t in trials:
        value = f"{t.value:.6g}" if t.value is not None else "-"
        params = json.dumps(t.params, sort_keys=True)
        lines.append(f"  {t.index:>5}  {t.state:<11}  {value:>12}  {params}")
    return lines


def stop_text(result: StopResult) -> str:
    sent = " then ".join(result.signals)
    how = "exited" if result.stopped else "is still running"
    lines = [
        f"stop {result.experiment_id}: {sent} to pid {result.pid}; the engine {how} after "
        f"{result.waited_s:.1f} s",
        f"  state: {result.state or 'unknown'}; trials done: "
        f"{result.trials_done if result.trials_done is not None else '?'}",
    ]
    if not result.stopped:
        lines.append("  stop again with --kill to SIGKILL it after the grace period")
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)


def logs_text(tail: LogTail) -> str:
    which = f"attempt {tail.attempt}" if tail.source == "attempt" else f"trial {tail.trial}"
    cut = f", last {len(tail.text.encode())} bytes" if tail.truncated else ""
    head = f"== {tail.experiment_id} {which}: {tail.path} ({tail.size_bytes} bytes{cut}) =="
    return f"{head}\n{tail.text.rstrip(chr(10))}"


def started_text(started: StartedEngine) -> str:
    verb = "launched" if started.action == "launch" else "resumed"
    lines = [f"{verb} {started.experiment_id} on engine commit {started.engine_commit}"]
    if started.detached:
        lines.append(f"  pid {started.pid} (detached); log: {started.log_path}")
    else:
        lines.append(f"  engine exited with code {started.exit_code}; log: {started.log_path}")
        if started.engine_said:
            lines.append(f"  engine said: {started.engine_said}")
        if started.remedy:
            lines.append(f"  remedy: {started.remedy}")
    lines.append(f"  binding: {started.binding_path}")
    return "\n".join(lines)


def status_text(status: ExperimentStatus) -> str:
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
    lines += trials_table(status.trials)
    if status.resume_command:
        lines.append(f"  resume: {status.resume_command}")
    lines += [f"  note: {n}" for n in status.notes]
    return "\n".join(lines)


FILTER_WORDS = {
    "bound_commit": "commit",
    "identity_digest": "identity digest",
    "closure_member": "closure member",
}


def listing_text(listing: ExperimentListing) -> str:
    several = len(listing.workspaces) > 1
    lines = [
        status_text(s) + (f"\n  workspace: {s.workspace}" if several else "")
        for s in listing.experiments
    ]
    lines += [f"unreadable: {problem}" for problem in listing.unreadable]
    if listing.next_cursor:
        shown = len(listing.experiments) + len(listing.unreadable)
        lines.append(
            f"this page shows {shown} of {listing.total} experiments; the next page: cursor "
            f"{listing.next_cursor}"
        )
    where = ", ".join(listing.workspaces)
    if listing.filters:
        asked = ", ".join(f"{FILTER_WORDS.get(k, k)} {v}" for k, v in listing.filters.items())
        return "\n".join(lines) or f"no experiment bound to {asked} in {where}"
    return "\n".join(lines) or f"no experiments in {where}"


def track_text(result: TrackResult) -> str:
    if result.unchanged and result.syncs == 1:
        head = f"tracked {result.experiment_id}: nothing new to write"
    else:
        head = (
            f"tracked {result.experiment_id}: {result.runs_created} runs created, "
            f"{result.runs_updated} updated"
            + (f", {result.syncs} syncs" if result.syncs > 1 else "")
        )
    lines = [
        head,
        f"  state: {result.state}; {result.trials} trials, each a nested run",
        f"  run: {result.run_url}",
    ]
    if result.artifacts_uploaded:
        lines.append(f"  uploaded: {', '.join(result.artifacts_uploaded)}")
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)
