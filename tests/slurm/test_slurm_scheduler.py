"""The scheduler's answers turned into the fixed state vocabulary, from recorded `squeue` and
`sacct` text (no scheduler needed), and the checks of the watcher's inputs and receipt text."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.signals import with_dispositions

from mcp_server.errors import InvalidInput
from mcp_server.slurm.receipts import clean, plain_word
from mcp_server.slurm.scheduler import derive_state, parse_sacct, parse_squeue
from mcp_server.slurm.watcher import WatchRequest
from mcp_server.values import JobId

# Recorded from `squeue --noheader --states=all --jobs=... --Format=JobID:|,State:|,Reason:|,
# RestartCnt:|,UserID:|,UserName:|,SubmitTime:|` on the test cluster (slurm-wlm 22.05).
SQUEUE = """\
5|PENDING|JobHeldUser|0|0|root|2026-12-01T10:33:07|
3|PENDING|BeginTime|1|0|root|2026-12-01T10:26:15|
7|RUNNING|None|2|1000|alice|2026-12-01T10:40:00|
4|CANCELLED|JobHeldUser|0|65534|nobody|2026-12-01T10:33:07|
8|OUT_OF_MEMORY|OutOfMemory|0|0|root|2026-12-01T10:41:00|
9|SUSPENDED|None|0|0|root|Unknown|
"""
# Recorded form of `sacct --noheader --parsable2 --allocations --format=JobIDRaw,State,UID,
# User,Submit` (a cluster with accounting storage).
SACCT = """\
11|CANCELLED by 0|0|root|2026-12-01T09:00:00
12|NODE_FAIL|0|root|2026-12-01T09:01:00
13|TIMEOUT|1000|alice|2026-12-01T09:02:00
"""


def test_squeue_rows_become_views_in_the_vocabulary() -> None:
    views = parse_squeue(SQUEUE)
    assert {j: (v.state, v.reason, v.generation) for j, v in views.items()} == {
        "5": ("pending", "JobHeldUser", 0),
        "3": ("requeued", "BeginTime", 1),  # pending after a requeue: waiting for generation 1
        "7": ("running", None, 2),
        "4": ("cancelled", None, 0),  # a reason is kept only while the job waits
        "8": ("out_of_memory", None, 0),
        "9": ("unknown", None, 0),  # not a word of ours: said, not guessed
    }
    assert views["9"].scheduler_state == "SUSPENDED" and views["9"].submitted is None
    assert (views["7"].uid, views["7"].user) == (1000, "alice")
    assert views["5"].submitted is not None and views["5"].submitted.endswith("+00:00")
    assert [v.live for v in views.values()] == [True, True, True, False, False, False]
    assert [v.ended for v in views.values()] == [False, False, False, True, True, False]


def test_sacct_rows_have_no_generation() -> None:
    views = parse_sacct(SACCT)
    assert {j: (v.state, v.generation, v.source) for j, v in views.items()} == {
        "11": ("cancelled", None, "sacct"),
        "12": ("node_fail", None, "sacct"),
        "13": ("timeout", None, "sacct"),
    }


@pytest.mark.parametrize(
    ("word", "restarts", "state"),
    [
        ("PENDING", 0, "pending"),
        ("PENDING", None, "pending"),
        ("PENDING", 3, "requeued"),
        ("REQUEUE_HOLD", 1, "requeued"),
        ("COMPLETING", 0, "running"),
        ("COMPLETED", 1, "completed"),
        ("FAILED", 0, "failed"),
        ("PREEMPTED", 0, "preempted"),
        ("BOOT_FAIL", 0, "node_fail"),
        ("DEADLINE", 0, "timeout"),
        ("cancelled by 1000", None, "cancelled"),
        ("", None, "unknown"),
        ("SOMETHING_NEW", 0, "unknown"),
    ],
)
def test_state_derivation(word: str, restarts: int | None, state: str) -> None:
    assert derive_state(word, restarts) == state


def test_malformed_rows_are_skipped_not_guessed() -> None:
    assert parse_squeue("garbage\n|PENDING|x|0|0|root|t|\n1|RUNNING|None\n") == {}


@pytest.mark.parametrize("raw", ["", "12;cluster", "-1", "1,2", "--jobs=1", "12 13", "abc"])
def test_a_job_id_is_digits_only(raw: str) -> None:
    with pytest.raises(InvalidInput, match="is not a SLURM job id"):
        JobId(raw)
    assert JobId(" 42 ") == "42" and JobId("42_3") == "42_3"


def test_receipt_text_is_cleaned() -> None:
    assert plain_word("BeginTime") == "BeginTime"
    assert plain_word("Reason with spaces") == "(withheld: not a plain word)"
    assert clean("see https://user:tok3n@host/x\nnext") == "see https://***@host/x next"
    assert len(clean("x" * 1000)) == 400


@pytest.mark.parametrize(
    "fields",
    [{}, {"once": True, "interval": 5.0}, {"interval": 0.0}, {"once": True, "pending_after": -1}],
)
def test_watch_takes_exactly_one_mode(fields: dict[str, object], tmp_path: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        WatchRequest(workspace=str(tmp_path), **fields)
    assert refused.value.exit_code == 2


def watching(workspace: Path, ignored: tuple[signal.Signals, ...]) -> subprocess.Popen[str]:
    """`slurm watch --interval` with `ignored` ignored and the signals that end it at their
    default, whatever this run inherited."""
    argv = [sys.executable, "-m", "mcp_server.faces.cli", "slurm", "watch"]
    argv += ["--workspace", str(workspace), "--interval", "0.1", "--json"]
    argv = with_dispositions(argv, ignored)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_watch_with_an_interval_ticks_until_interrupted(tmp_path: Path) -> None:
    """Every tick printed as it ends (one JSON document per line); SIGINT ends it with 130.
    No job is registered, so no scheduler is asked."""
    proc = watching(tmp_path, ())
    assert proc.stdout is not None
    ticks = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err
    assert [(t["workspace"], t["jobs"], t["receipts"]) for t in ticks] == [
        (str(tmp_path), [], [])
    ] * 2


def test_a_watch_started_in_the_background_keeps_ticking_through_sigint(tmp_path: Path) -> None:
    """Started as a shell starts `automl-setup slurm watch --interval 300 &` (SIGINT ignored, so
    that a Ctrl-C meant for the foreground does not reach it), the watch keeps what it was
    given: SIGINT changes nothing, SIGTERM (`kill %1`) ends it."""
    proc = watching(tmp_path, (signal.SIGINT, signal.SIGQUIT))
    assert proc.stdout is not None
    json.loads(proc.stdout.readline())
    proc.send_signal(signal.SIGINT)
    after = [json.loads(proc.stdout.readline()) for _ in range(3)]  # ticks on
    assert proc.poll() is None and [t["jobs"] for t in after] == [[], [], []]
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM and "interrupted" not in err, err
