"""Texts of the experiment results added for watching and stopping: the trials table of a
status, a stop, a log tail (registered in `messages.RENDER`)."""

from __future__ import annotations

import json

from mcp_server.experiments.control import StopResult
from mcp_server.experiments.logs import LogTail
from mcp_server.experiments.trials import Trial


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
