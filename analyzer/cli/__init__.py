"""The command line: the click group, its commands and options."""

CONSOLE = "lf.console"  # the key of the run's console in the click context's meta
