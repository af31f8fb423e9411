"""Unit tests of ``redraft.comparison``."""
