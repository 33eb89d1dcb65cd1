"""Reference AutoML core engine shipped with automl-setup."""

__version__ = "0.1.0"
