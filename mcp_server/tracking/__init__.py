"""Experiments in an experiment tracker (MLflow): `track` writes one, its trials and the engine
build it is bound to, through MLflow's own client (the `tracking` extra)."""
