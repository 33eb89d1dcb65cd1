"""automl-setup: install an AutoML core engine from source and keep experiments bound to it."""

try:
    from mcp_server._version import __version__
except ImportError as exc:  # pragma: no cover - a checkout nobody built or installed
    raise ImportError(
        "mcp_server/_version.py is written by the build from pyproject.toml's version: install "
        "automl-setup (pip install -e . in a checkout) instead of running an unbuilt tree"
    ) from exc

__all__ = ["__version__"]
