"""The run lifecycle: its config, its context, its directory and its records."""
