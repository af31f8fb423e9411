"""Unit tests of ``redraft.telemetry``."""
