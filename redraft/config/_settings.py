"""The three groups of settings, each field's default, bounds and help said once, here (see the package's
docstring for what each group holds)."""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from redraft.protocols.messages import Usage

Panel = Literal["Tasks", "Model", "Loop", "Budgets", "Output", "Cluster"]
"""Where a setting's flag is shown in ``redraft run --help``, in this order: what to run, the models and
their calls, the loop, what may be spent, where the run is written, where it runs."""
PANELS: tuple[Panel, ...] = typing.get_args(Panel)

DEFAULT_BASELINE_SAMPLES = 16
"""N, a comparison's sampling baseline's samples per task: above the mean model calls per task of the usual arms
(K=3, 3 rounds)."""


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
        str | None,
        _help("Task file (JSON lines, .csv or .parquet) to run instead of the scenario's own tasks.", panel="Tasks"),
    ] = None
    columns: Annotated[
        str | None,
        _help(
            "Which column of --tasks holds which field: id=COL,prompt=COL,reference.KEY=COL, a :int, :float, :json "
            "or :str after a column to read its cells so.",
            panel="Tasks",
        ),
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
    escalate: Annotated[
        str | None,
        _help(
            "Backend spec of a stronger model the adaptive strategy may buy a sample from, at its price, once "
            "the drafter's own calls stop paying on a task (give the budget in money: --usd-per-task).",
            panel="Model",
        ),
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
    usd_per_task: Annotated[
        Money | None,
        _help(
            "The adaptive strategy's budget in USD (priced from the price table or --prices): per task on average "
            "over the run, shared as --calls-per-task is; what mixes models of different prices (--escalate).",
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
    judge: Annotated[
        str | None,
        _help(
            "Backend spec of a judge model that grades each task's final answer by a rubric (--rubric) after the "
            "loop, apart from it: nothing it writes reaches the loop; the task's grade is the rubric's score.",
            panel="Model",
        ),
    ] = None
    rubric: Annotated[
        str | None,
        _help(
            "The --judge's rubric, a TOML or JSON file (also --grade rubric:FILE); default: the scenario's own.",
            panel="Tasks",
        ),
    ] = None
    judge_repeats: Annotated[
        int,
        Meta(ge=1, le=20),
        _help("Judgments the --judge makes of each answer; its grade is their mean.", panel="Model"),
    ] = 1


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
    stall_window: Annotated[
        PositiveSeconds | None,
        _help(
            "Stop the run when nothing (no model call, no check, no task) has succeeded for this many seconds "
            "while the machinery kept failing (default: 10 times the slowest round seen, at least 120).",
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
            ("USD", self.budget_usd, spent.spent_usd),  # what the run paid: a call another run paid is free
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
    otel: Annotated[
        str | None,
        _help(
            "Send each task's spans (OpenTelemetry, GenAI conventions) as it finishes to this OTLP/HTTP endpoint, "
            "e.g. http://127.0.0.1:4318.",
            panel="Output",
        ),
    ] = None
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
