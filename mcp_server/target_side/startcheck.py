"""Whether the engine starts (environment/startcheck.py): every console-script entry point of the
distribution `argv[1]` loaded, never called, as each launch would load it; an import that fails
leaves its exception as the last line of stderr and a non-zero exit. On success stdout is a
JSON list of what the imports depended on: every folder of the import path and every module's
source, bytecode and folder (the proof holds while none of them changed)."""

from __future__ import annotations

import json
import os
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


def depended_on() -> list[str]:
    """The import path's folders, and each loaded module's files and their folders: a module
    added, removed, edited or recompiled changes one of them (a file's ctime, a folder's mtime)."""
    found = {p for p in sys.path if p}
    for module in list(sys.modules.values()):
        for name in ("__file__", "__cached__"):
            path = getattr(module, name, None)
            if isinstance(path, str):
                found.update((path, os.path.dirname(path)))
    return sorted(found)


if __name__ == "__main__":
    load_console_scripts(sys.argv[1])
    print(json.dumps(depended_on()))
