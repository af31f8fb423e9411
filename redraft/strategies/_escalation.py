"""What a call of the run's stronger model (``--escalate``) costs, in calls of the drafter's model.

`adaptive` weighs every action by its expected chance of raising the task's best
per unit of cost, and its unit is a call of the drafter's model: a fresh sample or
a revision costs one, a critiqued revision two, an escalation `Escalation.ratio`,
what the stronger model charges for the task's mix of prompt and answer tokens
over what the drafter's model charges for the same. The prices are the run's price
table's (``--prices``), read once where the run is resolved; a drafter that costs
nothing cannot be weighed against, and is refused there.
"""

from __future__ import annotations

import msgspec

from redraft.protocols.messages import Usage


class Escalation(msgspec.Struct, frozen=True, kw_only=True):
    """The stronger model a task may buy calls from, and the two models' prices (USD per million tokens)."""

    model: str
    """The stronger model's name, as its calls are priced and reported."""
    drafter_usd: tuple[float, float]
    """The drafter's model: USD per million prompt tokens, and per million answer tokens."""
    escalated_usd: tuple[float, float]
    """The stronger model's, likewise."""

    def drafter_cost(self, usage: Usage) -> float:
        """USD the drafter's model charges for ``usage``'s tokens."""
        return _cost(self.drafter_usd, usage)

    def ratio(self, usage: Usage) -> float:
        """A call of the stronger model in calls of the drafter's, at ``usage``'s mix of prompt and answer
        tokens (the task's so far; even before any)."""
        if not usage.input_tokens and not usage.output_tokens:
            usage = Usage(input_tokens=1, output_tokens=1)
        return _cost(self.escalated_usd, usage) / _cost(self.drafter_usd, usage)


def _cost(price: tuple[float, float], usage: Usage) -> float:
    return (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1e6
