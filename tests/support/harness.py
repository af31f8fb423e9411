"""One task through the real `Arbiter`, in this process, with the scripted backend: no Ray.

Every role is a plain object (`local_roles`); the trace is encoded and decoded once at the end,
so a test reads the exact frames a run on Ray would write, validated. The drafter and the critic answer
from one script; the verifier, when a strategy asks it questions, may have its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from redraft.backends.scripted import Reply, ScriptedSpec
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.resolution import Cast, RoleSetup
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import Message, Task, encode, iter_frames
from redraft.strategies import Share, get_strategy

Script = Sequence[str] | Reply


def scripted_arbiter(
    script: Script,
    settings: ArbiterSettings,
    *,
    scenario: str = "arithmetic",
    model: str = "scripted",
    delay_s: float = 0.0,
    verifier: Script | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Arbiter:
    """An arbiter whose roles (those ``settings.strategy`` needs) all answer from ``script``."""
    spec = ScriptedSpec(script=script, model=model, delay_s=delay_s)
    verifier_spec = None if verifier is None else ScriptedSpec(script=verifier)
    setup = RoleSetup(scenario=scenario, drafter=spec, critic=spec, verifier=verifier_spec)
    return Arbiter(local_roles(Cast.of(setup, get_strategy(settings.strategy))), settings, clock=clock)


def run_task(
    task: Task,
    script: Script,
    *,
    strategy: str = "adversarial",
    samples: int = 2,
    patch: bool = False,
    model: str = "scripted",
    delay_s: float = 0.0,
    verifier: Script | None = None,
    timeout_s: float | None = None,
    share: Share | None = None,
    **convergence: Any,
) -> list[Message]:
    """Refine ``task`` (its gold withheld, as in a run) and return every message of its trace, `Result` last.

    ``convergence`` holds `ConvergenceConfig` fields (``max_rounds=3``, ``patience=5``, ...).
    """
    settings = ArbiterSettings(
        strategy=strategy,
        samples=samples,
        convergence=ConvergenceConfig(**convergence),
        revision_mode="patch" if patch else "rewrite",
        share=share,
    )
    arbiter = scripted_arbiter(
        script, settings, scenario=task.scenario, model=model, delay_s=delay_s, verifier=verifier
    )
    trace = asyncio.run(arbiter.run(task.without_gold(), timeout_s))
    return wire(trace)


def wire(trace: Sequence[Message]) -> list[Message]:
    """``trace`` as a run directory holds it: each message encoded, then every frame decoded and validated."""
    return list(iter_frames(b"".join(encode(m) for m in trace)))
