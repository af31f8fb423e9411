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
  tasks, the cache, the price table, tasks in flight).

Every field is also a command-line flag of ``redraft run``: ``--`` and the field's
name with dashes, its help from ``Meta(description=...)``, its box in the help from
its `Panel`, and its bounds from the ``Meta`` constraints, which `RunConfig.validate`
checks with messages that name the flag and the range. The CLI fills a `RunConfig`;
it does not retype it.
"""

from __future__ import annotations

import math
import typing
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from redraft.errors import UserError, unknown_name
from redraft.protocols.convergence import Budget, ConvergenceConfig
from redraft.protocols.messages import Usage

Panel = Literal["Tasks", "Model", "Loop", "Budgets", "Output", "Cluster"]
"""Where a setting's flag is shown in ``redraft run --help``, in this order: what to run, the models and
their calls, the loop, what may be spent, where the run is written, where it runs."""
PANELS: tuple[Panel, ...] = typing.get_args(Panel)


def _help(text: str, *, panel: Panel, **extra: Any) -> Meta:
    return Meta(description=text, extra={"panel": panel, **extra})


Count = Annotated[int, Meta(ge=1, le=1_000_000)]
PositiveSeconds = Annotated[float, Meta(gt=0, le=10_000_000)]
Money = Annotated[float, Meta(gt=0, le=1_000_000_000)]
Tokens = Annotated[int, Meta(ge=1, le=10**15)]


class Experiment(msgspec.Struct, frozen=True, kw_only=True):
    """What decides a task's result; every field enters the run's fingerprint."""

    scenario: Annotated[str, _help("Scenario name (see `redraft scenarios`).", panel="Tasks", argument=True)] = (
        "arithmetic"
    )
    tasks: Annotated[
        str | None, _help("Task file (JSON lines) to run instead of the scenario's own tasks.", panel="Tasks")
    ] = None
    strategy: Annotated[str, _help("Critic strategy (see `redraft strategies`).", panel="Loop")] = "adversarial"
    samples: Annotated[
        int, Meta(ge=1, le=1000), _help("Drafts per round (self-consistency K).", panel="Loop", short="-k")
    ] = 3
    max_rounds: Annotated[
        int, Meta(ge=1, le=1000), _help("Cycle limit: rounds in all, the first draft included.", panel="Loop")
    ] = 3
    threshold: Annotated[
        float, Meta(ge=0, le=1), _help("Stop a task once its best score reaches this.", panel="Loop")
    ] = 1.0
    patience: Annotated[
        int, Meta(ge=1, le=1000), _help("Stop after this many rounds without improvement.", panel="Loop")
    ] = 2
    seed: Annotated[int, Meta(ge=0, le=2**63 - 1), _help("Seed for generated tasks and sampling.", panel="Loop")] = 0
    drafter: Annotated[str, _help("Backend spec for the drafter (overrides --model).", panel="Model")] = "local"
    critic: Annotated[str, _help("Backend spec for the critic (overrides --model).", panel="Model")] = "local"
    verifier: Annotated[
        str | None, _help("Backend spec for model-based checks (overrides --model).", panel="Model")
    ] = None
    temperature: Annotated[float, Meta(ge=0, le=2), _help("Drafter sampling temperature.", panel="Model")] = 0.8
    max_tokens: Annotated[int, Meta(ge=1, le=1_000_000), _help("Maximum tokens per draft.", panel="Model")] = 128
    patch: Annotated[bool, _help("Revise with minimal search/replace edits instead of rewrites.", panel="Loop")] = False
    prompts: Annotated[
        str | None,
        _help("A TOML file of prompt templates over the built-in ones (each entry with a new version).", panel="Loop"),
    ] = None
    task_budget_usd: Annotated[Money | None, _help("Stop a task once it has cost this much.", panel="Budgets")] = None
    task_budget_tokens: Annotated[Tokens | None, _help("Stop a task after this many tokens.", panel="Budgets")] = None
    task_budget_calls: Annotated[Count | None, _help("Stop a task after this many model calls.", panel="Budgets")] = (
        None
    )
    calls_per_task: Annotated[
        Annotated[float, Meta(ge=1, le=1_000_000)] | None,
        _help(
            "The adaptive strategy's budget: model calls per task on average over the run; a task that passes "
            "early leaves its unspent calls to tasks still failing.",
            panel="Budgets",
        ),
    ] = None
    tokens_per_task: Annotated[
        Tokens | None,
        _help(
            "The adaptive strategy's budget in tokens (prompt and answer): per task on average over the run, "
            "shared as --calls-per-task is.",
            panel="Budgets",
        ),
    ] = None
    oracle_feedback: Annotated[
        bool,
        _help(
            "Feed the held-out grade to the loop as its feedback: an upper bound for studies, not a result.",
            panel="Loop",
        ),
    ] = False
    repeat: Annotated[
        int,
        Meta(ge=0, le=1000),
        _help("Which repeat of the same tasks this run is: salts every sampling seed.", panel="Loop"),
    ] = 0


class Budgets(msgspec.Struct, frozen=True, kw_only=True):
    """What the run may spend and how long a task may take; none of it enters the fingerprint."""

    task_timeout: Annotated[
        PositiveSeconds | None, _help("Stop a task after this many seconds, keeping its best so far.", panel="Budgets")
    ] = None
    task_watchdog: Annotated[
        PositiveSeconds | None,
        _help(
            "Redo a task (as hung) that has not come back after this many seconds "
            "(default: --task-timeout + 30, else 3600).",
            panel="Budgets",
        ),
    ] = None
    budget_usd: Annotated[Money | None, _help("Run budget: dispatch no task once spent.", panel="Budgets")] = None
    budget_tokens: Annotated[Tokens | None, _help("Run budget in tokens.", panel="Budgets")] = None
    budget_calls: Annotated[Count | None, _help("Run budget in model calls.", panel="Budgets")] = None
    budget_seconds: Annotated[
        PositiveSeconds | None,
        _help("Run budget in wall-clock seconds: in-flight tasks stop at the deadline.", panel="Budgets"),
    ] = None

    def spent_by(self, spent: Usage, elapsed_s: float = 0.0) -> str | None:
        """Why the run's budget is spent by ``spent`` after ``elapsed_s`` seconds of run time, or None."""
        limits = [
            ("USD", self.budget_usd, spent.cost_usd),
            ("tokens", self.budget_tokens, spent.total_tokens),
            ("calls", self.budget_calls, spent.calls),
            ("seconds", self.budget_seconds, round(elapsed_s, 1)),
        ]
        for name, limit, used in limits:
            if limit is not None and used >= limit:
                return f"run budget: {used:g} of {limit:g} {name} spent"
        return None


class Runtime(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how the run goes; none of it enters the fingerprint."""

    limit: Annotated[Count | None, _help("Run only the first N tasks.", panel="Tasks")] = None
    prices: Annotated[
        str | None, _help("JSON price file (USD per million tokens) over the built-in table.", panel="Budgets")
    ] = None
    dry_run: Annotated[
        bool,
        _help(
            "Print the run's estimated cost (expected and worst case, per role) and stop: no model is called, "
            "nothing is written.",
            panel="Budgets",
        ),
    ] = False
    cache: Annotated[bool, _help("Answer repeated model calls from the response cache.", panel="Model")] = True
    batch: Annotated[
        bool,
        _help(
            "Send each round's model calls through the provider's batch API (openai:, anthropic:): half the price, "
            "answered within hours.",
            panel="Model",
        ),
    ] = False
    batch_wait: Annotated[
        PositiveSeconds,
        _help(
            "With --batch: cancel a batch not ended after this many seconds and make its unanswered calls online.",
            panel="Model",
        ),
    ] = 86_400.0
    max_tasks_in_flight: Annotated[
        Count | None,
        _help(
            "Tasks dispatched at once (default: 10 per node with a local model, else 64).",
            panel="Cluster",
            aliases=["--max-in-flight"],
        ),
    ] = None
    out: Annotated[str | None, _help("Run directory (default runs/<run-id>).", panel="Output")] = None
    redo_untraced: Annotated[
        bool,
        _help(
            "On resume, redo the tasks whose trace was lost (a damaged or deleted trace.msgpack); by default their "
            "results stand.",
            panel="Output",
        ),
    ] = False
    verbose: Annotated[
        bool,
        _help(
            "Show Ray's own messages in the terminal too (they always go to RUN_DIR/ray.log).",
            panel="Output",
            short="-v",
        ),
    ] = False
    address: Annotated[
        str | None, _help("Join this Ray cluster (e.g. auto); default: start a local Ray.", panel="Cluster")
    ] = None


GROUPS: dict[str, type[msgspec.Struct]] = {"experiment": Experiment, "budgets": Budgets, "runtime": Runtime}


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


def flag(name: str) -> str:
    """The command-line flag of a setting."""
    return "--" + name.replace("_", "-")


def check_bounds(group: msgspec.Struct) -> None:
    """Each field of ``group`` against its ``Meta`` bounds (finite, in range); `UserError` naming the flag."""
    for name, hint in typing.get_type_hints(type(group), include_extras=True).items():
        value = getattr(group, name)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        low, high = _bounds(hint)
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{flag(name)} must be a finite number, got {value}")
        too_low = low is not None and (value < low[0] or (low[1] and value == low[0]))
        too_high = high is not None and value > high
        if too_low or too_high:
            raise UserError(f"{flag(name)} must be {_range(low, high)}, got {_number(value)}")


def _bounds(hint: Any) -> tuple[tuple[float, bool] | None, float | None]:
    """(lower bound, whether it is exclusive) and the upper bound of an annotated number type."""
    low: tuple[float, bool] | None = None
    high: float | None = None
    for meta in _metas(hint):
        if meta.ge is not None:
            low = (meta.ge, False)
        if meta.gt is not None:
            low = (meta.gt, True)
        if meta.le is not None:
            high = meta.le
    return low, high


def _metas(hint: Any) -> list[Meta]:
    """Every `Meta` in an annotation, through ``Annotated`` and ``X | None``."""
    found: list[Meta] = []
    if typing.get_origin(hint) is Annotated:
        base, *extras = typing.get_args(hint)
        found += [m for m in extras if isinstance(m, Meta)]
        found += _metas(base)
    else:
        for arg in typing.get_args(hint):
            found += _metas(arg)
    return found


def _range(low: tuple[float, bool] | None, high: float | None) -> str:
    if low is not None and high is None:
        return f"more than {_number(low[0])}" if low[1] else f"at least {_number(low[0])}"
    if low is None:
        return f"at most {_number(high or 0)}"
    opening = "(" if low[1] else "["
    return f"in {opening}{_number(low[0])}, {_number(high or 0)}]"


def _number(value: float) -> str:
    """``1,000,000`` for whole numbers, ``0.5`` otherwise."""
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e30 else f"{value:g}"


def description(group: type[msgspec.Struct], name: str) -> Meta:
    """The merged help and extras of one field (for the command line)."""
    hint = typing.get_type_hints(group, include_extras=True)[name]
    text, extra = "", {}
    for meta in _metas(hint):
        text = meta.description or text
        extra.update(meta.extra or {})
    return Meta(description=text, extra=extra)


def setting_aliases() -> dict[str, str]:
    """Other names of settings, each to its field's (``max_in_flight`` -> ``max_tasks_in_flight``).

    A field's ``aliases`` are flags (``--max-in-flight``); the name is the flag's, as a field's is.
    """
    return {
        alias.removeprefix("--").replace("-", "_"): name
        for group in GROUPS.values()
        for name in group.__struct_fields__
        for alias in (description(group, name).extra or {}).get("aliases", [])
    }
