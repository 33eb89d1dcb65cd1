"""The MCP face's rendering of a remedy's calls (`errors.Fix`): the tool and its arguments, as
an agent makes the call; the command line renders the same fix as a command
(`errors.command_line`). One remedy, two faces."""

from __future__ import annotations

import json

from mcp.server.mcpserver.exceptions import ToolError

from mcp_server.errors import Arg, Fix, InvalidInput, SetupError
from mcp_server.faces.registry import tool_name
from mcp_server.source.profile import EngineProfile

# The request field the MCP tools take as one `profile` object (the command line: flags).
PROFILE_FIELDS = frozenset(EngineProfile.model_fields) - {"file"}


def tool_call(fix: Fix | Arg) -> str:
    """`call install_engine with branch="dev", python="/srv/env"`; an argument as `name=VALUE`."""
    if isinstance(fix, Arg):
        return f"{fix.name}={fix.value}" if fix.value else fix.name

    tool = tool_name(fix.operation)
    args: dict[str, object] = {}
    profile: dict[str, object] = {}
    for name, value in fix.arguments:
        if value is None or value is False:
            continue
        (profile if name in PROFILE_FIELDS else args)[name] = value
    if profile:
        args["profile"] = profile
    shown = ", ".join(f"{name}={json.dumps(value)}" for name, value in args.items())
    return f"call {tool} with {shown}" if shown else f"call {tool}"


def refusal(step: str, cause: str, remedy: str) -> ToolError:
    """A refusal of the MCP face itself (no branch to install, the server stopping)."""
    return ToolError(InvalidInput(step, cause, remedy).full_text())


def tool_error_text(exc: SetupError) -> str:
    """A refusal as an MCP tool error (or resource error) says it."""
    return exc.full_text(tool_call)
