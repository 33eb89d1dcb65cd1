"""`automl-setup-mcp`: the MCP face. Every tool builds the request of its operation
(`mcp_server.operations`), calls it, and returns its result with the text the CLI prints for it.
The server instance and the reply helper are `mcp_app.py`, the tools `tools_*.py` (one module per
area, registered by the first call that needs them: until then the server lists its tools
from the committed catalog, `mcp_catalog.py`), the runtime (progress, errors, shutdown)
`mcp_runtime.py`, the resource templates `mcp_resources.py`.

stdout carries JSON-RPC only: the SDK's stdio transport points fd 1 at stderr while it serves,
the core sends git, uv and engine output to log files or captures it, and logging goes to stderr.
"""

from __future__ import annotations

import logging
import sys

import anyio

from mcp_server.faces.mcp.app import (
    server as server,  # the server, its tools registered on first use
)
from mcp_server.faces.mcp.lifecycle import RedactingFormatter, serve, serve_in_own_session
from mcp_server.faces.mcp.sdk import forbid_unknown_arguments, tidy_descriptions


def register_tools_and_resources() -> None:
    from mcp_server.faces.mcp.resources import register
    from mcp_server.faces.mcp.tools import register_tools

    register_tools()  # one tool per row of the registry (faces/mcp_tools.py)

    forbid_unknown_arguments(server)
    register(server)  # the resource templates (faces/mcp_resources.py)
    tidy_descriptions(server)


server.register_on_first_use(register_tools_and_resources)


# --------------------------------------------------------------------------------------------
# Entry point


def main() -> int:
    """Serve over stdio: `automl-setup-mcp`, or `automl-setup mcp`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # force: constructing MCPServer already configured the root logger at import time.
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    status = serve_in_own_session()
    if status is not None:
        return status
    try:
        anyio.run(serve, server)
    except KeyboardInterrupt:  # before the signal handlers are in place
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
