"""The corpus of bad input (see the README): hostile bytes, task files, flags, candidates and programs."""
