"""Whether the engine starts (environment/startcheck.py): every console-script entry point of the
distribution `argv[1]` loaded, never called, as each launch would load it; an import that fails
leaves its exception as the last line of stderr and a non-zero exit."""

from __future__ import annotations

import sys
from importlib import metadata


def load_console_scripts(distribution: str) -> int:
    """Import each console script's object; how many were loaded."""
    loaded = 0
    for ep in metadata.distribution(distribution).entry_points:
        if ep.group == "console_scripts":
            ep.load()
            loaded += 1
    return loaded


if __name__ == "__main__":
    load_console_scripts(sys.argv[1])
