"""Workloads shipped with the engine, runnable as `python -m automl_refengine.workloads.X`."""
