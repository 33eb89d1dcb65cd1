"""Progress of a foreground engine: "trial n of N, best so far, elapsed", read from the engine's
own status (its ledger replayed) as the experiment runs, one line whenever it changes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp_server.experiments.binding import Binding
from mcp_server.experiments.engine import engine_status

STEP = "trials"


def progress_line(status: dict[str, Any]) -> str:
    """One line of a status: trials done of planned, the best so far, the elapsed time."""
    best = status.get("best") or {}
    value = best.get("value")
    best_text = (
        f"best so far {best.get('metric', 'value')}={value:.6g} (trial {best.get('index')})"
        if isinstance(value, int | float)
        else "no best yet"
    )
    planned = status.get("planned_trials")
    return (
        f"trial {status.get('trials_done', '?')} of {planned if planned is not None else '?'} "
        f"done, {best_text}, elapsed {float(status.get('elapsed_s') or 0):.1f} s"
    )


class TrialWatch:
    """Called every few seconds while the engine runs; reports only what changed."""

    def __init__(
        self,
        binding: Binding,
        workspace: Path,
        environment: str,
        emit: Callable[[str, str], None],
    ) -> None:
        self.binding, self.workspace, self.environment = binding, workspace, environment
        self.emit = emit
        self.last: tuple[Any, ...] | None = None

    def tick(self) -> None:
        status, _problem = engine_status(self.binding, self.workspace, self.environment)
        if status is None:  # not yet written, or a torn line being appended: next tick
            return
        seen = (status.get("trials_done"), (status.get("best") or {}).get("value"))
        if seen != self.last:
            self.last = seen
            self.emit(STEP, progress_line(status))
