"""Every child process automl-setup starts: git, ssh, uv, the environment's interpreter, SLURM's
commands. One way to start each (`run`, `git`, `uv`), its step, environment rules (no terminal,
no prompt), log, time limit and stall bound given as arguments of the call (`bound.Watch`); the
watchdog (`watch`) over what the process tree is doing (`tree`), and why a transport failed
(`causes`)."""
