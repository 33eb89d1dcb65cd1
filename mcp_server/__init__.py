"""automl-setup: install an AutoML core engine from source and keep experiments bound to it."""

try:
    from mcp_server._version import __build__, __commit__, __version__
except ImportError as exc:  # pragma: no cover - a checkout nobody built or installed
    raise ImportError(
        "mcp_server/_version.py is written by the build (hatch_build.py) from pyproject.toml's "
        "version: install automl-setup (pip install -e . in a checkout) instead of running an "
        "unbuilt tree, and again after an upgrade of the checkout"
    ) from exc

# __version__: the distribution's version (what an index and `uvx --from automl-setup==` name);
# __build__: that version plus the commit it was built from, where known (`--version`, the MCP
# serverInfo, the records' tool_version); __commit__: that commit, or None.
__all__ = ["__build__", "__commit__", "__version__"]
