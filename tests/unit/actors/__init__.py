"""Unit tests of ``redraft.actors``."""
