"""Unit tests of ``redraft.backends``."""
