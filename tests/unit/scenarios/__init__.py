"""Unit tests of ``redraft.scenarios``."""
