"""redraft's tests: a package, so helpers import as ``tests.support.NAME`` from the repository root."""
