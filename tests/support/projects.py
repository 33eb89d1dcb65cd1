"""A user's own repository, as `automl-setup init` meets it."""

from __future__ import annotations

import subprocess
from pathlib import Path

# A user's own repository, as `automl-setup init` meets it.
CODEX_CONFIG = '# my Codex settings\nmodel = "o4"  # keep this\n\n[mcp_servers.other]\ncommand = "other-server"\nargs = ["--flag"]\n'  # noqa: E501


MCP_JSON = '{\n    "mcpServers": {\n        "other": {"command": "other-server", "args": []}\n    },\n    "extra": true\n}\n'  # noqa: E501


def user_project(root: Path) -> Path:
    """A user's repository: a git repo with its own pyproject.toml, an .mcp.json holding another
    server, and a .codex/config.toml with a comment and another server."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "pyproject.toml").write_text('[project]\nname = "my-training"\nversion = "1.0"\n')
    (root / ".mcp.json").write_text(MCP_JSON)
    (root / ".codex").mkdir()
    (root / ".codex" / "config.toml").write_text(CODEX_CONFIG)
    return root
