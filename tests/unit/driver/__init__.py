"""Unit tests of ``redraft.run``."""
