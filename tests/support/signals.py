"""A child whose signal dispositions a test relies on, whatever the test run inherited.

A POSIX shell ignores SIGINT and SIGQUIT in a command it starts in the background (`.ci/run &`),
`nohup` ignores SIGHUP, and every child inherits an ignored signal across exec. A test that
signals a child and expects it to end sets what it expects: its child starts through
`with_dispositions`, which sets them and execs the command (same pid, nothing else changed)."""

from __future__ import annotations

import signal
import sys

# The signals a test sends to end a child: each at its default in the child, but `ignored`.
ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_EXEC = (
    "import os, signal, sys\n"
    "ignored = set(sys.argv[2].split(','))\n"
    "for name in sys.argv[1].split(','):\n"
    "    signal.signal(getattr(signal, name), "
    "signal.SIG_IGN if name in ignored else signal.SIG_DFL)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def with_dispositions(argv: list[str], ignored: tuple[signal.Signals, ...] = ()) -> list[str]:
    """`argv` started with every signal of ENDING at its default, but `ignored` ignored (as a
    shell starts a command in the background)."""
    names = ",".join(s.name for s in ENDING)
    return [sys.executable, "-I", "-c", _EXEC, names, ",".join(s.name for s in ignored), *argv]
