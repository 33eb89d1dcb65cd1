"""Fault injection for the crash tests: with AUTOML_SETUP_PAUSE_AT=<point> an operation stops
at that point (an install's: environment/transaction.py PAUSE_POINTS; a track's:
tracking/sync.py PAUSE_POINTS), says so in the file named by AUTOML_SETUP_PAUSE_FILE, and
waits to be killed, or with AUTOML_SETUP_PAUSE_SECONDS=<s> only that long and then carries on
(a slow operation). Unset, a point costs one dictionary lookup."""

from __future__ import annotations

import os
import time
from pathlib import Path


def pause_at(point: str) -> None:
    if os.environ.get("AUTOML_SETUP_PAUSE_AT") != point:
        return
    marker = os.environ.get("AUTOML_SETUP_PAUSE_FILE")
    if marker:
        Path(marker).write_text(point, encoding="utf-8")
    seconds = os.environ.get("AUTOML_SETUP_PAUSE_SECONDS")
    if seconds:
        time.sleep(float(seconds))
        return
    while True:
        time.sleep(3600)
