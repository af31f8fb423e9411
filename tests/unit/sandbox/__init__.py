"""Unit tests of ``redraft.sandbox``."""
