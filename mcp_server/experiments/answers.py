"""The engine's `status` answers for one experiment or many: a snapshot's while nothing the
answer depends on changed (snapshot.py), else the engine asked, many ids of one engine in one
process and a few processes at once, each id alone when the engine answers only for one."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mcp_server.errors import SetupError
from mcp_server.experiments.binding import Binding
from mcp_server.experiments.engine import (
    Answer,
    engine_status,
    engine_statuses,
    status_interpreter,
)
from mcp_server.experiments.files import ExperimentFiles, lock_is_held
from mcp_server.experiments.snapshot import (
    SnapshotKey,
    Snapshots,
    Stat,
    engine_file_stats,
    environment_stats,
)
from mcp_server.experiments.trials import EngineTrials, read_trials

BATCH = 500  # ids per engine process at most (its command line stays far below ARG_MAX)
WORKERS = max(2, min(4, os.cpu_count() or 1))  # engine processes at once
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Asked:
    """An experiment whose engine answer is wanted, and where the engine runs from."""

    files: ExperimentFiles
    binding: Binding
    environment: str | None  # where it last ran; else its launch environment

    @property
    def command(self) -> tuple[str, str, str]:
        engine = self.binding.engine
        interpreter = status_interpreter(self.binding, self.environment)
        return str(interpreter), engine.build.distribution, engine.cli

    @property
    def prefix(self) -> Path:
        return Path(self.environment or self.binding.engine.environment_path)


def _key(asked: Asked, environments: dict[Path, tuple[Stat, ...]]) -> SnapshotKey:
    prefix = asked.prefix
    if prefix not in environments:
        environments[prefix] = environment_stats(prefix, Path(asked.command[0]))
    return SnapshotKey(
        command=asked.command,
        identity_digest=asked.binding.engine.identity_digest,
        environment=environments[prefix],
        engine_files=engine_file_stats(asked.files.engine_dir),
    )


def _lock_free(files: ExperimentFiles) -> bool:
    try:
        return not lock_is_held(files)
    except SetupError:  # the status itself reports it; no snapshot either way
        return False


@dataclass(frozen=True)
class Known:
    """The engine's answer (or why there is none), and the trials of the ledger it answered
    for (read only once it answered: a ledger it cannot read in time is not read here either)."""

    data: dict[str, Any] | None
    problem: str | None
    trials: EngineTrials | None = None
    trials_problem: str | None = None  # why they could not be read (the status still stands)
    lock_free: bool | None = None  # checked right after a snapshot answered; else not yet


def _with_trials(files: ExperimentFiles, answer: Answer) -> Known:
    data, problem = answer
    if data is None:
        return Known(None, problem)
    try:
        return Known(data, None, read_trials(files))
    except SetupError as exc:
        return Known(data, None, None, exc.message)


def engine_answers(asked: Sequence[Asked], workspace: Path, known: set[str] | None) -> list[Known]:
    """Each experiment's answer, in order. `known`: every experiment id of the workspace (a
    listing), whose other snapshots are forgotten."""
    snapshots = Snapshots(workspace)
    environments: dict[Path, tuple[Stat, ...]] = {}
    keys = [_key(one, environments) for one in asked]
    free = [_lock_free(one.files) for one in asked]
    answers: list[Known | None] = [None] * len(asked)
    for n, one in enumerate(asked):
        found = snapshots.get(one.files.experiment_id, keys[n]) if free[n] else None
        if found is not None:
            answers[n] = Known(found.answer, None, found.trials, lock_free=True)
    missing = [n for n, answer in enumerate(answers) if answer is None]
    fresh = _ask([asked[n] for n in missing], workspace)
    after: dict[Path, tuple[Stat, ...]] = {}  # the environments as they are now
    for n, answer in zip(missing, fresh, strict=True):
        one = asked[n]
        result = answers[n] = _with_trials(one.files, answer)
        # Kept only if nothing moved while the engine answered and no engine was running.
        state = result.data.get("state") if result.data is not None else "running"
        keep = result.trials is not None and free[n] and state != "running"
        if keep and _key(one, after) == keys[n] and _lock_free(one.files):
            assert result.data is not None and result.trials is not None
            snapshots.put(one.files.experiment_id, keys[n], result.data, result.trials)
        else:
            snapshots.drop(one.files.experiment_id)
    if known is not None:
        snapshots.keep_only(known)
    return [answer for answer in answers if answer is not None]


def _ask(asked: list[Asked], workspace: Path) -> list[Answer]:
    """The engine's answers: one process per batch of ids of the same engine command."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for n, one in enumerate(asked):
        groups.setdefault(one.command, []).append(n)
    batches = [
        (command, chunk)
        for command, members in groups.items()
        if len(members) > 1
        for chunk in _chunks(members)
    ]
    answers: dict[int, Answer] = {}

    def batch(item: tuple[tuple[str, str, str], list[int]]) -> None:
        command, members = item
        ids = [asked[n].files.experiment_id for n in members]
        found = engine_statuses(command, ids, workspace)
        if found is not None:
            answers.update(zip(members, found, strict=True))

    _parallel(batch, batches)
    alone = [n for n in range(len(asked)) if n not in answers]

    def single(n: int) -> Answer:
        one = asked[n]
        return engine_status(one.binding, one.files.workspace, one.environment)

    answers.update(zip(alone, _parallel(single, alone), strict=True))
    return [answers[n] for n in range(len(asked))]


def _chunks(members: list[int]) -> list[list[int]]:
    """`members` in nearly equal batches of 2 to BATCH ids, a multiple of WORKERS of them when
    there are enough, so no process runs alone in a last round (1,000 ids: 2 batches of 500
    on 2 workers, where 5 of 200 left the fifth alone in a third round)."""
    rounds = -(-len(members) // (BATCH * WORKERS))  # ceil
    count = max(1, min(rounds * WORKERS, len(members) // 2))
    size, extra = divmod(len(members), count)
    starts = [n * size + min(n, extra) for n in range(count + 1)]
    return [members[starts[n] : starts[n + 1]] for n in range(count)]


def _parallel(work: Callable[[T], R], items: list[T]) -> list[R]:
    if len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(items))) as pool:
        return list(pool.map(work, items))
