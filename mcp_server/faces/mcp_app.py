"""The MCP server instance and what every tool module shares: how a reply is made (an
operation's result plus the text the command line prints for it) and the hints of read-only
tools. The tools live in `tools_*.py`, one module per area; `server.py` imports them all."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from mcp_server import __version__
from mcp_server.faces import messages

INSTRUCTIONS = """\
Installs an AutoML core engine from source at an exact commit, verifies and records it, and runs
experiments bound to that exact build. Before install_engine, ask the user: "main, or which
development branch?" - never choose a branch yourself (the tool asks the user itself when the
client supports elicitation; list_branches offers the real choices). Show the commit
resolve_branch gives, and install that branch with expect_commit set to it. Omit `profile` to use
the project's engine (each reply's profile_source says which). Pass absolute paths. Resume
takes the exact experiment id (see list_experiments). A tool error is a refusal with its cause
and remedy: read it, do not retry blindly."""

server = MCPServer("automl-setup", version=__version__, instructions=INSTRUCTIONS)

Message = Annotated[str, Field(description="The text `automl-setup` prints for the same call.")]

ReplyT = TypeVar("ReplyT", bound=BaseModel)


def reply(cls: type[ReplyT], operation: str, result: BaseModel, **extra: Any) -> ReplyT:
    """The tool's structured result: the operation's result, `extra`, and its message."""
    return cls.model_validate(
        {**result.model_dump(), **extra, "message": messages.render(operation, result)}
    )


# The hints of the tools that only read local files and processes: safe to call any time.
LOCAL_READ = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}
