"""What a run is made of, in three groups, each field's default, bounds and help said once, here.

- `Experiment`: everything that decides what a task's result is. Its fields (with
  every prompt template's version and a task file's hash) are the run's identity,
  whose hash, the fingerprint, lets a rerun with the same ``--out`` resume and
  refuses one that would mix two configurations. Per-task limits on tokens, calls
  and USD are here: they decide where a task stops.
- `Budgets`: what the run may spend (USD, tokens, calls, wall-clock seconds) and
  how long one task may run. Wall-clock limits depend on the machine's load, not
  on what a task computes, and run budgets may grow between invocations: none
  enters the fingerprint.
- `Runtime`: where and how the run goes (output directory, cluster, how many
  tasks, the cache, the price table, tasks in flight, where its spans go).

Every field is also a command-line flag of ``redraft run``: ``--`` and the field's
name with dashes, its help from ``Meta(description=...)``, its box in the help from
its `Panel`, and its bounds from the ``Meta`` constraints, which `RunConfig.validate`
checks with messages that name the flag and the range. The CLI fills a `RunConfig`;
it does not retype it.
"""

from redraft.config._fields import check_bounds, description, field_types, flag, setting_aliases
from redraft.config._run import RunConfig
from redraft.config._settings import (
    DEFAULT_BASELINE_SAMPLES,
    GROUPS,
    PANELS,
    Budgets,
    Count,
    Experiment,
    Money,
    Panel,
    PositiveSeconds,
    Runtime,
    Tokens,
)

__all__ = [
    "DEFAULT_BASELINE_SAMPLES",
    "GROUPS",
    "PANELS",
    "Budgets",
    "Count",
    "Experiment",
    "Money",
    "Panel",
    "PositiveSeconds",
    "RunConfig",
    "Runtime",
    "Tokens",
    "check_bounds",
    "description",
    "field_types",
    "flag",
    "setting_aliases",
]
