"""The command line, `automl-setup`: the parser built from the registry's rows (`commands.py`), one
module of subcommands per area, progress on a terminal, shell completion, the demos."""
