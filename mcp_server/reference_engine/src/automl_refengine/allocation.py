"""SLURM allocations of a controller job: the allocation cap, the generation, and requeue.

`run`/`resume --max-allocations CAP` (default: $AUTOML_CONTROLLER_MAX_ALLOCATIONS, which the
automl-setup controller script exports unchanged, so the engine command it execs stays the
bound one) count every allocation, the first included: generation = the job's restart count
(0 first); cap 3 permits generations 0, 1 and 2; generation >= cap exits 2 "allocations
exhausted" before anything is touched. Inside a job, the generation is read from the
scheduler itself (`scontrol show job`), not only from SLURM_RESTART_COUNT.

On the warning signal (SIGUSR1, sent before the time limit) the controller stops starting
trials, records the running one as interrupted, and requeues its own job when the cap allows
another allocation and work remains.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from automl_refengine.errors import InvalidInput, Refused

CAP_VARIABLE = "AUTOML_CONTROLLER_MAX_ALLOCATIONS"
SCONTROL_TIMEOUT_S = 30.0


def decimal(name: str, text: str) -> int:
    """A decimal count: digits 0-9 only, zero padding accepted ("003" is 3), any length."""
    if not text or not all(c in "0123456789" for c in text):
        raise InvalidInput(f"{name} must be a decimal number, got {text[:40]!r}")
    return int(text)  # Python ints do not overflow, and "010" is ten, never octal


@dataclass(frozen=True)
class Allocation:
    cap: int
    generation: int
    job_id: str | None

    @property
    def may_requeue(self) -> bool:
        """Whether one more allocation is within the cap (and there is a job to requeue)."""
        return self.job_id is not None and self.generation + 1 < self.cap


def _scontrol(*args: str) -> str:
    try:
        proc = subprocess.run(
            ["scontrol", *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=SCONTROL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Refused(f"scontrol {args[0]} could not run: {exc}") from None
    if proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())[:200]
        raise Refused(f"scontrol {args[0]} failed (exit {proc.returncode}): {said}")
    return proc.stdout


def restart_count(job_id: str) -> int:
    """The job's restart count as the scheduler reports it (`Restarts=N`)."""
    found = re.search(r"(?:^|\s)Restarts=([0-9]+)(?:\s|$)", _scontrol("show", "job", "-o", job_id))
    if found is None:
        raise Refused(f"scontrol show job {job_id} reports no restart count")
    return int(found.group(1))


def exhausted(generation: int, cap: int) -> bool:
    """The one boundary, shared with the controller script: generation >= cap."""
    return generation >= cap


def current_allocation(cap_text: str | None) -> Allocation | None:
    """This allocation, or None when no cap was given (not a controller job); refuses with
    exit 2 when the cap is malformed or exhausted."""
    if cap_text is None:
        return None
    cap = decimal(f"--max-allocations ({CAP_VARIABLE})", cap_text)
    if cap < 1:
        raise InvalidInput(f"--max-allocations must be at least 1, got {cap_text[:40]!r}")
    job_id = os.environ.get("SLURM_JOB_ID") or None
    told = decimal("SLURM_RESTART_COUNT", os.environ.get("SLURM_RESTART_COUNT", "0"))
    generation = restart_count(job_id) if job_id else told  # the scheduler is authoritative
    if exhausted(generation, cap):
        raise InvalidInput(
            f"allocations exhausted: generation {generation} >= cap {cap_text} "
            f"(--max-allocations); nothing was started"
        )
    return Allocation(cap=cap, generation=generation, job_id=job_id)


def requeue(allocation: Allocation) -> str:
    """Ask the scheduler to requeue this job (another allocation resumes the experiment)."""
    assert allocation.job_id is not None
    _scontrol("requeue", allocation.job_id)
    return (
        f"requeued job {allocation.job_id}: generation {allocation.generation + 1} of at most "
        f"{allocation.cap} resumes the experiment"
    )
