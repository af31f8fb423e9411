"""redraft: refine LLM outputs in loops of draft, critique, verify and decide, at scale, on Ray.

The public API: `refine` and `refine_async` (one task, in this process), `run` (a batch on Ray, resumable),
`estimate` (what a run would spend, before it starts), `compare` (strategies against sampling at matched cost,
on Ray), `tune` (the prompts refined on train tasks, adopted only if they win on a test split read once),
`RunConfig` (every setting, named as the command line's flags), `CompareSettings` and `TuneSettings` (a
comparison's and a tune's own), `Plugins` (what a user plugs in: check, grade, backends; `TunePlugins` with a
proposer), the hooks that follow and stop each (`RunHooks`, `CompareHooks`, `TuneHooks`), `Task` and `Result`, and
what they return (`Refinement`, `RunOutcome`, `Estimate`, `ComparisonOutcome`, `TuneOutcome`).
Everything else is internal.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redraft.actors import RunHooks, RunOutcome, estimate, run
    from redraft.comparison import CompareHooks, CompareSettings, Comparison, ComparisonOutcome, compare
    from redraft.config import RunConfig
    from redraft.engine import Plugins, Refinement, refine, refine_async
    from redraft.engine.estimate import Estimate
    from redraft.protocols.messages import Result, Task
    from redraft.tuning import TuneHooks, TuneOutcome, TunePlugins, TuneSettings, tune

_WHERE = {
    "RunHooks": "redraft.actors",
    "RunOutcome": "redraft.actors",
    "estimate": "redraft.actors",
    "run": "redraft.actors",
    "CompareHooks": "redraft.comparison",
    "CompareSettings": "redraft.comparison",
    "Comparison": "redraft.comparison",
    "ComparisonOutcome": "redraft.comparison",
    "compare": "redraft.comparison",
    "RunConfig": "redraft.config",
    "Plugins": "redraft.engine",
    "Refinement": "redraft.engine",
    "refine": "redraft.engine",
    "refine_async": "redraft.engine",
    "Estimate": "redraft.engine.estimate",
    "Result": "redraft.protocols.messages",
    "Task": "redraft.protocols.messages",
    "TuneHooks": "redraft.tuning",
    "TuneOutcome": "redraft.tuning",
    "TunePlugins": "redraft.tuning",
    "TuneSettings": "redraft.tuning",
    "tune": "redraft.tuning",
}
"""Where each public name lives: imported on first use, so ``import redraft.errors`` (and the command line's
``--help``) does not load the engine, the actor system and Ray."""


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'redraft' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "CompareHooks",
    "CompareSettings",
    "Comparison",
    "ComparisonOutcome",
    "Estimate",
    "Plugins",
    "Refinement",
    "Result",
    "RunConfig",
    "RunHooks",
    "RunOutcome",
    "Task",
    "TuneHooks",
    "TuneOutcome",
    "TunePlugins",
    "TuneSettings",
    "compare",
    "estimate",
    "refine",
    "refine_async",
    "run",
    "tune",
]
__version__ = "0.1.0"
