"""Where the roles run and what they reserve, read from what the scenario declares its checks cost.

- A scenario whose checks are ``instant`` (`redraft.scenarios.Scenario.check_cost`)
  gets no verifier actors when no verifier model is asked questions: each arbiter
  checks drafts itself, as a call of microseconds should, without two hops. Its
  grades are instant too: the driver grades such tasks itself, with no grader actor.
- A verifier whose checks ``execute`` the candidate reserves a CPU per actor (a
  sandboxed program runs while it checks), or its share of one when runs share the
  nodes (`RoleSetup.cpu_share`: each lane of a comparison has a verifier on every
  node, and a whole CPU each would leave the later lanes unplaceable on a small
  cluster); every other role actor reserves none:
  they wait on models, and a grader runs at most one grade per CPU at once on its
  own threads, after the loop.
"""

from __future__ import annotations

from redraft.engine.resolution import Cast, RoleSetup
from redraft.protocols.messages import RoleName


def verifies_in_arbiter(cast: Cast) -> bool:
    """Whether the arbiters verify drafts themselves: instant checks, and no verifier model asked questions."""
    return cast.setup.check_cost == "instant" and cast.verifier_model is None


def grades_on_driver(setup: RoleSetup) -> bool:
    """Whether the driver grades finished tasks itself: the scenario's grade is instant."""
    return setup.check_cost == "instant"


def cpus_of(setup: RoleSetup, role: RoleName) -> float:
    """The CPUs an actor of ``role`` reserves."""
    executes = setup.check_cost == "executes"
    return setup.cpu_share if role == "verifier" and executes else 0.0
