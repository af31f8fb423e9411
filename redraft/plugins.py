"""Registries of named things (scenarios, strategies, backends) and the plugins that fill them.

Built-ins and third-party packages alike are listed in entry-point groups
(``redraft.scenarios``, ``redraft.strategies``, ``redraft.backends``); each entry
point names a module whose import runs its registration decorators. A registry
loads its group the first time it is read.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from redraft.errors import UserError, unknown_name

T = TypeVar("T")
F = TypeVar("F")

_loaded: set[str] = set()
_started: set[str] = set()
_loading = threading.RLock()
"""Held while a group loads: a second thread (a comparison's lanes) waits for a full registry, never sees half of one.
Re-entrant, because a plugin's module may read another registry while it loads."""


def load_group(group: str) -> None:
    """Import every module of ``group`` once; a plugin that fails to import is skipped with a warning."""
    if group in _loaded:
        return
    with _loading:
        if group in _started:
            return  # loaded, or loading in this very thread (a module of the group reads its own registry)
        _started.add(group)
        for entry in entry_points(group=group):
            try:
                entry.load()
            except Exception as exc:  # one broken plugin must not take the others down
                warnings.warn(f"redraft plugin {entry.name!r} ({entry.value}) failed to load: {exc}", stacklevel=2)
        _loaded.add(group)


def _where(target: object) -> str:
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


class Registry(Generic[T]):
    """Named entries of one kind, filled by decorators in the modules of an entry-point group."""

    def __init__(self, kind: str, group: str) -> None:
        self.kind = kind
        self.group = group
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """A decorator that registers its target under ``name``; a class also gets ``name`` as its attribute.

        A name is registered once: a second, different target under the same name
        raises `UserError` naming both (a plugin must not silently replace a
        built-in or another plugin). Registering the same target again (its module
        imported twice) is harmless.
        """

        def add(target: F) -> F:
            existing = self._entries.get(name)
            if existing is not None and _where(existing) != _where(target):
                raise UserError(
                    f"{self.kind} {name!r} is registered twice: by {_where(existing)} and by {_where(target)}"
                )
            if isinstance(target, type):
                setattr(target, "name", name)  # noqa: B010 - said once, in the decorator
            self._entries[name] = target  # type: ignore[assignment]
            return target

        return add

    def names(self) -> list[str]:
        load_group(self.group)
        return sorted(self._entries)

    def get(self, name: str) -> T:
        """The entry ``name``; `UserError` suggesting the nearest and listing the known ones otherwise."""
        load_group(self.group)
        try:
            return self._entries[name]
        except KeyError:
            raise unknown_name(self.kind, name, sorted(self._entries)) from None
