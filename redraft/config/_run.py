"""A whole run's settings: `RunConfig`, made from flat settings named as the command line's flags."""

from __future__ import annotations

from typing import Any

import msgspec

from redraft.config._fields import check_bounds, flag, setting_aliases
from redraft.config._settings import GROUPS, Budgets, Experiment, Runtime
from redraft.errors import UserError, unknown_name
from redraft.protocols.convergence import Budget, ConvergenceConfig


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A whole run: `Experiment`, `Budgets`, `Runtime`. Make one from flat settings with `RunConfig.build`."""

    experiment: Experiment = Experiment()
    budgets: Budgets = Budgets()
    runtime: Runtime = Runtime()

    @classmethod
    def build(cls, **settings: Any) -> RunConfig:
        """A config from flat settings named as the command line's flags are (``samples=3, limit=10,
        out="runs/x"``), or by a field's alias (`setting_aliases`); ``model`` is every model role's backend,
        as ``--model`` is (``drafter``, ``critic`` given beside it win).

        `UserError` for a name no group has, or a setting given twice (by its name and an alias). Values
        are not checked here: see `validate`.
        """
        model = settings.pop("model", None)
        if model is not None:
            settings.setdefault("drafter", model)
            settings.setdefault("critic", model)
        grouped: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}
        owner = {name: group for group, struct in GROUPS.items() for name in struct.__struct_fields__}
        aliases = setting_aliases()
        for given, value in settings.items():
            name = aliases.get(given, given)
            if name not in owner:
                raise unknown_name("setting", given, sorted(owner))
            if name in grouped[owner[name]]:
                raise UserError(f"{flag(given)} is another name of {flag(name)}: give one of the two")
            grouped[owner[name]][name] = value
        return cls(
            experiment=Experiment(**grouped["experiment"]),
            budgets=Budgets(**grouped["budgets"]),
            runtime=Runtime(**grouped["runtime"]),
        )

    def replace(self, **settings: Any) -> RunConfig:
        """This config with some flat settings changed."""
        return RunConfig.build(**(self.flat() | settings))

    def flat(self) -> dict[str, Any]:
        """Every setting by its field name (the manifest's ``config``)."""
        return {k: v for group in GROUPS for k, v in msgspec.structs.asdict(getattr(self, group)).items()}

    def validate(self) -> None:
        """Check every setting's type and bounds; `UserError` naming the flag (and the range) of the first bad one."""
        for group in GROUPS:
            struct = getattr(self, group)
            check_bounds(struct)
            try:  # the types, by msgspec, from the same annotations
                msgspec.convert(msgspec.to_builtins(struct), type(struct))
            except msgspec.ValidationError as exc:
                where = str(exc).rsplit("`$.", 1)[-1].rstrip("`")
                raise UserError(f"{flag(where)}: {str(exc).split(' - at ')[0]}") from None

    def convergence(self) -> ConvergenceConfig:
        e = self.experiment
        return ConvergenceConfig(
            threshold=e.threshold,
            max_rounds=e.max_rounds,
            patience=e.patience,
            budget=Budget(
                max_tokens=e.task_budget_tokens,
                max_calls=e.task_budget_calls,
                max_usd=e.task_budget_usd,
                max_seconds=self.budgets.task_timeout,
            ),
        )
