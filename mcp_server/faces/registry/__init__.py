"""The registry: one row per operation, and both faces are built from it. A row refers to the
operation's function, request and result models and renderer through a typed loader that
imports them when called (`Operation`: a command imports only what it runs, and the type
checker checks the links), its exit-code rule, its command's help
(summary, paragraph, example, the exit codes it can return) and its MCP tool (name, title,
annotations). `python -m mcp_server.docgen` writes the reference docs from the same rows, so
the help, the tools and the reference cannot disagree.

Adding an operation: its request (`requests.py` or its area's), its function (`operations.py`
or its area's), a row here, and its renderer (`faces/render/`). The command's flags and the
tool's arguments are declared with the row's face modules (`faces/cli/`, `faces/mcp/`); a test
checks that both carry exactly the request's fields, but for the documented differences.
"""

from __future__ import annotations

from typing import Any

from mcp_server.faces.registry import engine, experiments, slurm, store
from mcp_server.faces.registry.row import (
    ALWAYS,
    COMMON_CODES,
    INTERRUPTED,
    LOCAL_READ,
    PIPE_CLOSED,
    ExitCodes,
    Flag,
    Hints,
    Operation,
    Progress,
    Row,
    Tool,
)

__all__ = [
    "ALWAYS",
    "COMMON_CODES",
    "INTERRUPTED",
    "LOCAL_READ",
    "PIPE_CLOSED",
    "ROWS",
    "ExitCodes",
    "Flag",
    "Hints",
    "Operation",
    "Progress",
    "Row",
    "Tool",
    "row",
    "tool_name",
]

# Every operation, in the order of the command line's --help and the reference.
ROWS: tuple[Row[Any, Any], ...] = (*engine.ROWS, *experiments.ROWS, *store.ROWS, *slurm.ROWS)


def row(command: str) -> Row[Any, Any]:
    """The row of the operation named `command` (a command line's words: "slurm submit")."""
    for found in ROWS:
        if found.command == command:
            return found
    raise KeyError(command)


def tool_name(command: str) -> str:
    """The MCP tool of an operation, or the name itself when it is none (a remedy's call)."""
    return next((r.tool for r in ROWS if r.command == command), command)
