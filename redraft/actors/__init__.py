"""The actor system, and the only package that imports Ray: the engine's roles made Ray actors, and a run.

`run` refines a scenario's tasks on a Ray cluster (joining one, or starting a local Ray), writes the run directory
as tasks land, and resumes it when called again with the same output directory; `estimate` says what it would spend,
before anything starts (`_preflight` reads what a run directory already spent). Inside: the roles as actors
(`_members`, where frames are encoded and decoded, once), the arbiter as an actor (`_arbiter`), where each actor
goes and what it reserves (`_factory`, `_placement`), the fleet kept whole (`_fleet`) and shared by a command's runs
(`_leases`) or by a server's replica (`_served`), the dispatch loop (`_dispatcher`), what happens when the machinery
fails under a task (`_attempts`), the run's Ray metrics (`_metrics`), Ray itself, asked in one place (`_ray`), and
started or joined in one place (`_startup`, with `_reaper` ending what a killed driver's local Ray leaves).
"""

from redraft.actors._endpoints import EndpointHook, EndpointState
from redraft.actors._hosts import HostState
from redraft.actors._leases import Fleets
from redraft.actors._live import Live
from redraft.actors._proposer import RayProposer
from redraft.actors._running import RunHooks
from redraft.actors._served import FleetArbiters
from redraft.actors._startup import ensure_ray
from redraft.actors.driver import RunOutcome, estimate, run, run_resolved

__all__ = [
    "EndpointHook",
    "EndpointState",
    "FleetArbiters",
    "Fleets",
    "HostState",
    "Live",
    "RayProposer",
    "RunHooks",
    "RunOutcome",
    "ensure_ray",
    "estimate",
    "run",
    "run_resolved",
]
