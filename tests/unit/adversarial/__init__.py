"""The corpus of bad input (see docs/contributing.md): hostile bytes, task files, flags, candidates and programs."""
