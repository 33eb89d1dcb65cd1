"""The two thin faces (command line, MCP server), the texts both show, and the demo."""
