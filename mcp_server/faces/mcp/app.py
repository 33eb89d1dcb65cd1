"""The MCP server instance, `automl-setup`, with its instructions to the agent; its tools are
made from the registry (`tools.py`) and registered by the first call that needs them
(`sdk.DeferredServer`)."""

from __future__ import annotations

from mcp_server import __build__
from mcp_server.faces.mcp.sdk import DeferredServer

INSTRUCTIONS = """\
Installs an AutoML core engine from source at an exact commit, verifies and records it, and runs
experiments bound to that exact build. Before install_engine, ask the user: "main, or which
development branch?" - never choose a branch yourself (the tool asks the user itself when the
client supports elicitation; list_branches offers the real choices). Show the commit
resolve_branch gives, and install that branch with expect_commit set to it. Omit `profile` to use
the project's engine (each reply's profile_source says which). Pass absolute paths (a relative
one is read below your first root). Resume takes the exact experiment id (see
list_experiments). A tool error is a refusal with its cause and remedy: read it, do not retry
blindly."""


server = DeferredServer("automl-setup", version=__build__, instructions=INSTRUCTIONS)
