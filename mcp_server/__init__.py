"""automl-setup: install an AutoML core engine from source and keep experiments bound to it."""

__version__ = "0.1.0"
