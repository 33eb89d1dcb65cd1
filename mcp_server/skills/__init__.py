"""The agent-skill bundle: validation, sync to both discovery paths, link check."""
