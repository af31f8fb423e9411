"""`Plugins`: what a user plugs into `redraft.run`, `redraft.compare` and `redraft.tune` as Python objects."""

from __future__ import annotations

from dataclasses import dataclass

from redraft.config import RunConfig
from redraft.engine.resolution import BackendOverrides, with_check
from redraft.scenarios.user_check import CheckFunction


@dataclass(frozen=True)
class Plugins:
    """The Python objects a run takes in place of names the config would give: the functions that steer and
    grade a task file's tasks (``config.experiment.tasks``), and backend objects in place of the config's model
    specs. The default plugs in nothing: the config's scenario and models, as the command line runs them.

        >>> from redraft import Plugins
        >>> from redraft.backends.scripted import ScriptedSpec
        >>> model = ScriptedSpec(script=lambda request: "Answer: 7")
        >>> plugged = Plugins(backends={"drafter": model, "critic": model})
    """

    check: CheckFunction | None = None
    """Steers each task: a function ``(text, data)`` or ``(text, data, prompt)`` returning a score in [0, 1] or
    ``(score, detail)``, the feedback the loop refines by, as `redraft.refine`'s ``check``."""
    grade: CheckFunction | None = None
    """Grades each task's final answer, held out of the loop (the same form as ``check``, and only with one)."""
    backends: BackendOverrides | None = None
    """Backend objects by role (``drafter``, ``critic``, ``verifier``, ``judge``, ``escalate``) that replace the
    config's model specs for those roles."""

    def steering(self, config: RunConfig) -> RunConfig:
        """``config`` steered by ``check`` and graded by ``grade`` (`redraft.engine.resolution.with_check`); ``config``
        itself when no check is plugged in."""
        return with_check(config, self.check, self.grade)
