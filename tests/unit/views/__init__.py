"""Unit tests of ``redraft.views``."""
