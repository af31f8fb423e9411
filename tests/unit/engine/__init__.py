"""Unit tests of ``redraft.engine``: the loop and the roles in one process, with no Ray."""
