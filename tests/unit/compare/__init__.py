"""Unit tests of ``redraft.compare``."""
