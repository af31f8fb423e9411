"""The refinement loop with no Ray: the arbiter's loop, the roles, their prompts, and `refine` in one process.

The roles (`Drafter`, `Critic`, `Verifier`, `Grader`) take typed requests and return typed replies;
the `Arbiter` runs each task's loop over them, through `Roles` of `Member`s wherever those live (in
this process, `LocalMember`; on a cluster, the actor system's own). `refine` and `refine_async` run
one task here; `redraft.engine.resolution` resolves a `RunConfig` once into what the roles are built from.
"""

from redraft.engine._model_role import CallSettings
from redraft.engine._plugins import Plugins
from redraft.engine._refine import Refinement, local_roles, refine, refine_async, run_blocking
from redraft.engine.arbiter import Arbiter, ArbiterSettings, Checkpoint
from redraft.engine.critic import Critic
from redraft.engine.drafter import Drafter
from redraft.engine.grader import Grader
from redraft.engine.pools import LocalMember, Member, Reply, Request, Role, RolePool, Roles
from redraft.engine.resolution import RoleSetup, arbiter_settings, check_out, role_setup
from redraft.engine.verifier import Verifier

__all__ = [
    "Arbiter",
    "ArbiterSettings",
    "CallSettings",
    "Checkpoint",
    "Critic",
    "Drafter",
    "Grader",
    "LocalMember",
    "Member",
    "Plugins",
    "Refinement",
    "Reply",
    "Request",
    "Role",
    "RolePool",
    "RoleSetup",
    "Roles",
    "Verifier",
    "arbiter_settings",
    "check_out",
    "local_roles",
    "refine",
    "refine_async",
    "role_setup",
    "run_blocking",
]
