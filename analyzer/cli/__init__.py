"""The command line: the click group, its commands and options."""
