"""The engine's console script run without its shebang (experiments/engine.py): a copied venv's
scripts still name the original's interpreter, so running them could start another
environment's engine. `launcher.py DIST NAME ARGS...` reads the entry point of console script
NAME from DIST's metadata in this interpreter's environment and calls it with ARGS; the entry
point is only ever imported, never turned into code."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from typing import Any

DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"


def entry_point(distribution: str, name: str) -> metadata.EntryPoint | None:
    """Console script `name` of `distribution`, when exactly one has a plain module:function
    value; else None."""
    try:
        eps = [
            ep
            for ep in metadata.distribution(distribution).entry_points
            if ep.group == "console_scripts" and ep.name == name
        ]
    except metadata.PackageNotFoundError:
        return None
    if len(eps) != 1 or not re.fullmatch(DOTTED + ":" + DOTTED, eps[0].value):
        return None
    return eps[0]


def main(argv: list[str]) -> Any:  # the console function's return, for sys.exit
    """Run console script argv[2] of distribution argv[1] with argv[3:] as its own arguments:
    its return value, the process's exit status."""
    distribution, name = argv[1], argv[2]
    ep = entry_point(distribution, name)
    if ep is None:
        return (
            f"automl-setup: {distribution} has no console script {name!r} with a plain "
            "module:function entry point in this environment"
        )
    sys.argv = [name, *argv[3:]]
    return ep.load()()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
