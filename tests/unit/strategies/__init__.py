"""Unit tests of ``redraft.strategies``."""
