"""What a backend shares with the rest of its node or cluster, and where that lives.

A backend may need one object per node (the embedded model's host, which holds the
weights) or one per cluster (an endpoint's rate limiter). It asks the process's
`Services` for it by name and calls it through `Services.call`, and never learns
whether the answer is an object of this process or a named Ray actor:

- in a plain process (tests, `redraft.refine`, the driver) it is `InProcess`: one
  object per name, made on first use and kept here;
- in a process the actor system set up (a role actor) it is the actor system's own
  implementation (`redraft.actors`), which it installs with `install` before it
  builds the role, so no code below the actor system imports Ray.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Services(Protocol):
    """Where the shared objects of this process live."""

    def shared(self, cls: Callable[..., T], name: str, *args: Any, per_node: bool, **options: Any) -> Any:
        """The one ``cls(*args)`` named ``name``: one per node (``per_node``) or one per cluster.

        Every caller must pass the same ``args`` for a name. ``options`` are placement options an
        implementation that makes actors reads (CPUs, concurrency, restarts); others ignore them.
        """
        ...

    async def call(self, target: Any, method: str, *args: Any) -> Any:
        """``target.method(*args)``, awaited, for a target `shared` returned."""
        ...

    def node(self) -> str:
        """An id of the node this process runs on ('' in a plain process)."""
        ...


class InProcess:
    """The services of a plain process: one object per name, kept for the process's life."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}

    def shared(self, cls: Callable[..., T], name: str, *args: Any, per_node: bool, **options: Any) -> Any:
        if name not in self.objects:
            self.objects[name] = cls(*args)
        return self.objects[name]

    async def call(self, target: Any, method: str, *args: Any) -> Any:
        result = getattr(target, method)(*args)
        return await result if inspect.isawaitable(result) else result

    def node(self) -> str:
        return ""


IN_PROCESS = InProcess()
"""This process's own services (what `current` returns until something installs others)."""
_installed: list[Services] = []


def current() -> Services:
    """The services of this process."""
    return _installed[-1] if _installed else IN_PROCESS


def install(services: Services) -> None:
    """Make ``services`` this process's services (the actor system, in each process it sets up)."""
    _installed.append(services)
