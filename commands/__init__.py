"""The commands beside cli.py: what each `kernelwright` subcommand does."""
