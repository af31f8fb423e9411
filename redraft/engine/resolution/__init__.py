"""A run resolved once: its config, the user's check and grade functions and the backends, made objects.

Invariant: `resolve_run` is where a run's names become objects, each made by the module named for it and read
from the `ResolvedRun` everywhere after: the scenario and strategy (looked up here by name, once), whether they
fit the settings (`_fit`), where the tasks come from (`_tasks`), the roles' backends and prompts (`RoleSetup`,
`_roles`), the money (prices, a batch's share, escalation: `Money`, `_money`), the arbiter's rules with one value
each (`ArbiterSettings`, `_arbiter`), the roles as the strategy plays them (`Cast`: constructors, the grader,
the verifier's model, endpoints, paced roles; `_cast`), and the identity and manifest (`_identity`). Each
file the config names (price table, prompts file, task file, rubric) is read here once (a task file checked in
the read that hashes it), and nothing below takes the config apart again or looks a scenario or a strategy up
by name. A bad name, file or setting is a `UserError` here; no Ray, no I/O but reading those files. See
docs/architecture.md, "A run is resolved once".
"""

from redraft.engine.resolution._arbiter import arbiter_settings
from redraft.engine.resolution._cast import Cast, Constructor, grader_constructor, paced_roles
from redraft.engine.resolution._fit import check_plans, shortfalls
from redraft.engine.resolution._identity import check_out
from redraft.engine.resolution._money import Money, model_of
from redraft.engine.resolution._roles import BackendOverrides, RoleSetup, role_setup
from redraft.engine.resolution._run import ResolvedRun, resolve_run, shares_batch, with_check
from redraft.engine.resolution._tasks import TaskSource

__all__ = [
    "BackendOverrides",
    "Cast",
    "Constructor",
    "Money",
    "ResolvedRun",
    "RoleSetup",
    "TaskSource",
    "arbiter_settings",
    "check_out",
    "check_plans",
    "grader_constructor",
    "model_of",
    "paced_roles",
    "resolve_run",
    "role_setup",
    "shares_batch",
    "shortfalls",
    "with_check",
]
