"""A second opinion: the Agent Skills reference validator (`skills-ref`) on every skill.

Our rules (validate.py) are the strict intersection of the clients'; the reference validator
is what the Agent Skills project itself accepts. `skills check` reports both, and a finding of
either fails it. `skills-ref` is imported only here and only when the check runs: it comes
with the `test` extra (it needs Python 3.11, automl-setup runs on 3.10), so its absence is a
refusal naming the package, never an import error at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from mcp_server.errors import SetupError
from mcp_server.skills.links import Problem
from mcp_server.skills.validate import SKILL_FILE

REFERENCE_RULE = "skills-ref"
REFERENCE_REQUIREMENT = "skills-ref>=0.1.1,<0.2"
# strictyaml marks the failing line `(line: N)`, counted from the opening `---` line: the
# file's own line number. Other findings name no line and are reported at line 1.
_STRICTYAML_LINE = re.compile(r"\(line: (\d+)\)")


def _reference_validate() -> Callable[[Path], list[str]]:
    try:
        from skills_ref import validate
    except ImportError:
        raise SetupError(
            "skills check",
            "the Agent Skills reference validator (Python package skills-ref) is not installed",
            f"install it: pip install '{REFERENCE_REQUIREMENT}' (Python 3.11 or newer; it comes "
            "with automl-setup's test extra: pip install -e '.[test]')",
        ) from None
    return validate


def reference_problems(skill_folders: Iterable[Path]) -> list[Problem]:
    """The reference validator's findings for each skill folder, one Problem per message."""
    validate = _reference_validate()  # refuse before validating any folder
    problems: list[Problem] = []
    for folder in skill_folders:
        if folder.name.startswith(".") or folder.is_symlink() or not folder.is_dir():
            # Our rules refuse these already; the reference would follow a link out of the tree.
            continue
        for message in validate(folder):
            line = _STRICTYAML_LINE.search(message)
            one_line = " ".join(message.split())  # every finding prints as one line
            found = Problem(
                folder / SKILL_FILE, int(line[1]) if line else 1, REFERENCE_RULE, one_line
            )
            problems.append(found)
    return problems
