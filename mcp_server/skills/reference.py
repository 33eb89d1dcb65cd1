"""A second opinion: the Agent Skills reference validator (`skills-ref`) on every skill.

Our rules (validate.py) are the strict intersection of the clients'; the reference validator
is what the Agent Skills project itself accepts. `skills check` reports both, and a finding of
either fails it. `skills-ref` is imported only here and only when the check runs: it comes
with the `test` extra, so its absence is a refusal naming the package, never an import error
at start-up. It needs Python 3.11 and automl-setup runs on 3.10: there, where it cannot be
installed, the check runs our rules alone and says so (`skipped_note`, printed on stderr; the
exit code is our rules'), never silently a half check.
"""

from __future__ import annotations

import platform
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from mcp_server.errors import SetupError
from mcp_server.skills.links import Problem
from mcp_server.skills.validate import SKILL_FILE

REFERENCE_RULE = "skills-ref"
REFERENCE_REQUIREMENT = "skills-ref>=0.1.1,<0.2"
REFERENCE_PYTHON = (3, 11)  # skills-ref's own floor (its requires-python)
# strictyaml marks the failing line `(line: N)`, counted from the opening `---` line: the
# file's own line number. Other findings name no line and are reported at line 1.
_STRICTYAML_LINE = re.compile(r"\(line: (\d+)\)")


def _reference_validate() -> Callable[[Path], list[str]] | None:
    """The reference validator; None where it cannot be installed (an older Python)."""
    try:
        from skills_ref import validate
    except ImportError:
        if skipped_note() is not None:
            return None
        raise SetupError(
            "skills check",
            "the Agent Skills reference validator (Python package skills-ref) is not installed",
            f"install it: pip install '{REFERENCE_REQUIREMENT}' (Python 3.11 or newer; it comes "
            "with automl-setup's test extra: pip install -e '.[test]')",
        ) from None
    return validate


def skipped_note() -> str | None:
    """What `skills check` says where the reference validator cannot be installed (an older
    Python) and is not: that it was skipped, and why; else None."""
    try:
        import skills_ref  # noqa: F401  (installed anyway: it runs)
    except ImportError:
        pass
    else:
        return None
    if sys.version_info >= REFERENCE_PYTHON:
        return None
    floor = ".".join(map(str, REFERENCE_PYTHON))
    return (
        f"the Agent Skills reference validator (skills-ref) was skipped: it needs Python {floor} "
        f"or newer, this is {platform.python_version()}; only automl-setup's own rules checked "
        f"the skills (run the check on Python {floor}+ for both)"
    )


def reference_problems(skill_folders: Iterable[Path]) -> list[Problem]:
    """The reference validator's findings for each skill folder, one Problem per message;
    none where it cannot run (`skipped_note` says so)."""
    validate = _reference_validate()  # refuse before validating any folder
    if validate is None:
        return []
    # Our rules refuse these already; the reference would follow a link out of the tree.
    folders = [
        f for f in skill_folders if not (f.name.startswith(".") or f.is_symlink() or not f.is_dir())
    ]
    problems: list[Problem] = []
    for folder in folders:
        for message in validate(folder):
            line = _STRICTYAML_LINE.search(message)
            one_line = " ".join(message.split())  # every finding prints as one line
            found = Problem(
                folder / SKILL_FILE, int(line[1]) if line else 1, REFERENCE_RULE, one_line
            )
            problems.append(found)
    return problems
