"""What every task loop of one arbiter shares: its settings, its strategy, its roles and its clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from redraft.backends.pricing import PriceTable, default_prices
from redraft.engine.pools import ROLE_CALL_DEADLINE_S, Roles
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import RevisionMode, RoleName, Usage
from redraft.protocols.stages import Stage
from redraft.strategies import Escalation, Share, Strategy

CallHook = Callable[[RoleName, str, Usage], None]
"""Told of every model call a task's loop pays for (role, model, priced usage); replayed replies are not."""


class ArbiterSettings(msgspec.Struct, frozen=True, kw_only=True):
    strategy: str = "adversarial"
    samples: int = 3
    """K: candidates drafted in parallel per round (self-consistency)."""
    seed: int = 0
    repeat: int = 0
    """A repeat of the same tasks (``redraft compare --repeats``): salts every sampling seed."""
    convergence: ConvergenceConfig = ConvergenceConfig()
    memory: int = 3
    """How many earlier attempts a revision prompt recalls."""
    prices: PriceTable = msgspec.field(default_factory=default_prices)
    revision_mode: RevisionMode = "rewrite"
    """``patch``: revisions are minimal search/replace edits of the best so far (delta-based correction)."""
    run: str = ""
    """The run's id, tagging the model-call metrics the actor system records; '' records none."""
    share: Share | None = None
    """Each task's share of the batch's budget, for a strategy that spends to it (``adaptive``)."""
    escalation: Escalation | None = None
    """The stronger model a strategy may buy drafts from (``--escalate``), with both models' prices."""
    batch: str = ""
    """Names the batch every arbiter of a run shares (statistics a strategy learns across it are kept under
    it); '' makes each arbiter its own batch (`redraft.refine`)."""
    call_deadline_s: float | None = ROLE_CALL_DEADLINE_S
    """How long one role call may take before its member counts as hung; None: no limit (``--batch``, whose
    calls wait hours for their batch, which the batch's own deadline bounds)."""
    paced_roles: frozenset[RoleName] = frozenset()
    """Roles whose calls no fixed deadline cuts: their backend fails a call only when its server stops making
    progress (the embedded model's, `redraft.backends._progress`), so a busy machine is slower, not failed."""


@dataclass(frozen=True)
class Rules:
    """The rules every task loop of an arbiter plays by, resolved once from its settings."""

    settings: ArbiterSettings
    """As the strategy plays them (`redraft.engine.arbiter.Arbiter`): its convergence with one round for a
    strategy that does not revise, its K one for a single-sample strategy, its batch named."""
    strategy: Strategy
    roles: Roles
    clock: Callable[[], float]
    """Monotonic seconds, injected so tests can pin time."""
    on_call: CallHook
    stages: Callable[[str], list[Stage]]
    """A scenario's stages, by its name (looked up once per scenario)."""
