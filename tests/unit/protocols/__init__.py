"""Unit tests of ``redraft.protocols``."""
