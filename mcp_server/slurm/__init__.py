"""Running experiments on a SLURM cluster: the scheduler, the controller, the watcher."""
