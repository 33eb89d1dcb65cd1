"""The bundle in a user's project: the skills this installation carries and `automl-setup init`."""
