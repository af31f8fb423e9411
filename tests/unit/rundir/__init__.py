"""Unit tests of ``redraft.rundir``."""
