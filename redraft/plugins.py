"""Loading the modules that register scenarios, strategies and backends.

Built-ins and third-party packages alike are listed in entry-point groups
(``redraft.scenarios``, ``redraft.strategies``, ``redraft.backends``); each entry
point names a module whose import runs its registration decorators.
"""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points

_loaded: set[str] = set()


def load_group(group: str) -> None:
    """Import every module of ``group`` once; a plugin that fails to import is skipped with a warning."""
    if group in _loaded:
        return
    _loaded.add(group)
    for entry in entry_points(group=group):
        try:
            entry.load()
        except Exception as exc:  # one broken plugin must not take the others down
            warnings.warn(f"redraft plugin {entry.name!r} ({entry.value}) failed to load: {exc}", stacklevel=2)
