"""The watcher's receipts: append-only, numbered JSON lines, one per thing that happened.

A receipt holds allow-listed fields only (the model forbids any other): ids we validated, the
scheduler's state word and wait reason (checked against a plain-word pattern), numbers, the
resume command we build ourselves, and our own sentence. Never a job's name, command, working
directory, comment or environment: the scheduler is never even asked for them
(`scheduler.SQUEUE_FIELDS`). Free text passes `clean` (credentials in URLs masked, control
characters dropped, bounded) on its way in.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from mcp_server.fsutil import numbered_append
from mcp_server.persisted import Persisted, load_persisted_lines
from mcp_server.redact import redact_text
from mcp_server.slurm.scheduler import JobState

RECEIPTS = "slurm-receipts.jsonl"
MAX_TEXT = 400
_WORD = re.compile(r"[A-Za-z0-9_,:().=/+-]{1,80}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")

ReceiptKind = Literal[
    "state_change",
    "generation_boundary",
    "pending_too_long",
    "ended_unfinished",
    "owner_conflict",
    "identity_conflict",
    "live_conflict",
    "scheduler_error",
    "storage_error",
]


class Receipt(Persisted):
    schema_version: Literal[1] = Field(1, description="Format version of the receipt line.")
    receipt: int = Field(description="1-based number in the receipts ledger (0: not stored).")
    time: str = Field(description="When it was noticed (ISO 8601 UTC).")
    kind: ReceiptKind = Field(description="What happened (a state change, a long wait, ...).")
    job_id: str | None = Field(None, description="SLURM job id it is about.")
    experiment_id: str | None = Field(None, description="Experiment it is about.")
    state: JobState | None = Field(None, description="The job's state now.")
    previous_state: JobState | None = Field(None, description="Its state at the tick before.")
    generation: int | None = Field(None, description="Its allocation generation now.")
    previous_generation: int | None = Field(None, description="Its generation at the tick before.")
    reason: str | None = Field(None, description="The scheduler's wait reason, a plain word.")
    waited_seconds: int | None = Field(None, description="How long it waited, for a long wait.")
    experiment_state: str | None = Field(None, description="The engine's own status word.")
    command: str | None = Field(None, description="What to run next (resume), when there is.")
    detail: str = Field(description="One sentence of ours saying what happened.")


def clean(text: str) -> str:
    """Free text fit for a receipt: credentials masked, no control characters, bounded."""
    text = _CONTROL.sub(" ", redact_text(text)).strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def plain_word(value: str | None) -> str | None:
    """A scheduler word (state, reason) as it may be recorded: a plain token, else withheld."""
    if value is None:
        return None
    return value if _WORD.fullmatch(value) else "(withheld: not a plain word)"


def receipts_path(sidecar: Path) -> Path:
    return sidecar / RECEIPTS


def append_receipts(path: Path, drafts: list[dict[str, Any]]) -> list[Receipt]:
    """Number and append the receipts of one tick (under the ledger's flock, one line each)."""
    if not drafts:
        return []
    stored = []
    with numbered_append(path, key="receipt", what="receipts ledger") as (first, write):
        for offset, draft in enumerate(drafts):
            receipt = Receipt(**{**draft, "receipt": first + offset})
            write(receipt.model_dump(mode="json"))
            stored.append(receipt)
    return stored


def read_receipts(path: Path) -> tuple[list[Receipt], int | None]:
    return load_persisted_lines(
        Receipt,
        path,
        what="receipts ledger",
        entry="receipts ledger line",
        remedy="restore the file from a backup; it is never rewritten automatically",
    )
