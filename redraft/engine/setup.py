"""What the roles and arbiters are built from, every setting checked before anything starts.

`role_setup` validates a `RunConfig` against its scenario and strategy (resolved once, by
`redraft.engine.resolved.resolve_run`, and handed here as objects) and resolves its backend specs,
prompts file and task file: a bad one is a `UserError` here, on the caller's side, before any role
exists. `role_constructors` then says which roles a strategy needs and how each is made; the same
constructors build the roles in one process (`redraft.engine._refine`) and inside Ray actors
(`redraft.actors`).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any, Literal

from redraft.backends import batchable
from redraft.backends.base import BackendSpec
from redraft.backends.local import paces_itself
from redraft.backends.pricing import load_prices
from redraft.backends.registry import resolve
from redraft.config import Experiment, RunConfig
from redraft.engine._model_role import CallSettings
from redraft.engine._money import check_escalation, check_priced, escalation
from redraft.engine.arbiter import ArbiterSettings
from redraft.engine.critic import Critic
from redraft.engine.drafter import Drafter
from redraft.engine.grader import GRADERS, Grader, JudgeAsk, JudgeSetup
from redraft.engine.prompt_files import load_prompts
from redraft.engine.prompts import Prompts
from redraft.engine.verifier import Verifier
from redraft.errors import RedraftWarning, UserError
from redraft.protocols.messages import RoleName
from redraft.sandbox import isolation
from redraft.scenarios import CheckCost, Scenario, provide
from redraft.scenarios.taskfile import validate_task_file
from redraft.scenarios.user_check import CheckFunction, UserCheck
from redraft.strategies import Share, Strategy

BackendOverrides = dict[RoleName | Literal["escalate"], BackendSpec]
"""Per-role backend objects (``drafter``, ``critic``, ``verifier``, ``judge``, and ``escalate``: the stronger model,
when the config names one) that replace the config's spec strings (the Python API and tests)."""

Constructor = tuple[type, tuple[Any, ...], dict[str, Any]]
"""How one role is made: its class, positional and keyword arguments (plain data, so it can travel)."""


@dataclass(frozen=True)
class RoleSetup:
    """Everything needed to start the roles of one run."""

    scenario: str
    drafter: BackendSpec
    critic: BackendSpec
    verifier: BackendSpec | None = None
    escalate: BackendSpec | None = None
    """The stronger model every drafter also holds (``--escalate``): it drafts the requests that say so."""
    temperature: float = 0.8
    draft_max_tokens: int = 128
    critique_max_tokens: int = 512
    critic_temperature: float = 0.3
    cache: bool = True
    """Answer repeated model calls from the node's response cache (`redraft.backends.cache`)."""
    oracle: bool = False
    """Feed the held-out grade back as feedback (an oracle-feedback run: upper-bound studies only)."""
    prompts: Prompts | None = None
    """The templates the roles render (a prompts file's over the built-in ones); None: the built-in ones."""
    cpu_share: float = 1.0
    """The share of a CPU an actor that runs candidates reserves (`redraft.actors._placement`): a comparison's
    lanes run side by side and split the nodes between them."""
    payer: str = ""
    """Whose money the roles' calls are (`CallSettings.payer`): the run directory's id, set once it is open."""
    check_cost: CheckCost = "blocking"
    """What the scenario's checks and grade cost (`Scenario.check_cost`): where verifiers and graders are placed
    (`redraft.actors._placement`)."""
    judge: JudgeSetup | None = None
    """The run's judge (``--judge``): it grades every finished task in place of the scenario's grade."""


def with_check(config: RunConfig, check: CheckFunction | None, grade: CheckFunction | None = None) -> RunConfig:
    """``config`` steered by ``check`` and graded by ``grade``, functions given as objects (the Python API).

    They become a scenario named ``check:MODULE:QUALNAME`` (`UserCheck.of`), provided to this process and,
    through the actor system, to every actor of a run, so a function defined in a notebook works too.
    """
    if check is None:
        if grade is not None:
            raise UserError("a grade goes with a check: it grades the tasks the check steers")
        return config
    made = UserCheck.of(check, grade)
    provide(made)
    return config.replace(scenario=made.name)


def role_setup(
    config: RunConfig, scenario: Scenario, strategy: Strategy, backends: BackendOverrides | None = None
) -> RoleSetup:
    """Validate the config for ``scenario`` and ``strategy`` (its names, resolved) and resolve every backend
    spec and file it names; `UserError` on the first bad one."""
    config.validate()
    experiment = config.experiment
    load_prices(config.runtime.prices)
    check_plans(strategy, scenario)
    for shortfall in shortfalls(experiment, scenario, strategy):
        warnings.warn(shortfall, RedraftWarning, stacklevel=1)  # one place: each said once per process
    if scenario.check_cost == "executes" and isolation.view_problem() is not None:
        raise UserError(isolation.refusal(scenario.name))
    if experiment.tasks is not None:  # every line or row made a task, before anything starts
        validate_task_file(experiment.tasks, scenario, experiment.columns)
    elif experiment.columns is not None:
        raise UserError("--columns maps the columns of a task file: give it with --tasks FILE")
    check_share(experiment, strategy)
    check_escalation(experiment, strategy)
    backends = backends or {}
    drafter = backends.get("drafter") or resolve(experiment.drafter)
    critic = backends.get("critic") or resolve(experiment.critic)
    verifier = backends.get("verifier") or (resolve(experiment.verifier) if experiment.verifier else None)
    escalate = (backends.get("escalate") or resolve(experiment.escalate)) if experiment.escalate else None
    judge = judge_setup(experiment, scenario, drafter, backends.get("judge"))
    # a bad prompts file fails here, before any role starts; it may hold the judge's entries when there is one
    prompts = load_prompts(experiment.prompts, judge.templates if judge else None)
    models = {"drafter": drafter, "critic": critic if strategy.critic_role == "critic" else None}
    check_priced(load_prices(config.runtime.prices), models, experiment.usd_per_task is not None)
    escalation(load_prices(config.runtime.prices), drafter, escalate)  # refused here, before anything starts
    judged_by = judge.backend if judge else None
    if config.runtime.batch and not any(batchable(s) for s in (drafter, critic, verifier, judged_by)):
        shown = ", ".join(sorted({s.spec for s in (drafter, critic, judged_by) if s is not None}))
        raise UserError(
            f"--batch sends model calls through the batch APIs of openai: and anthropic:; this run's models "
            f"({shown}) have none: run it without --batch"
        )
    return RoleSetup(
        scenario=experiment.scenario,
        check_cost=scenario.check_cost,
        drafter=drafter,
        critic=critic,
        verifier=verifier,
        escalate=escalate,
        temperature=experiment.temperature,
        draft_max_tokens=experiment.max_tokens,
        cache=config.runtime.cache,
        oracle=experiment.oracle_feedback,
        prompts=prompts,
        judge=judge if judge is None else dataclasses.replace(judge, prompts=_versions(prompts, judge.templates)),
    )


def judge_setup(
    experiment: Experiment, scenario: Scenario, drafter: BackendSpec, given: BackendSpec | None = None
) -> JudgeSetup | None:
    """The run's judge (``--judge``, or ``given``, the API's backend object), or None; `UserError` for a rubric
    without a judge or one that cannot be read (`GRADERS`' ``judge`` reads it)."""
    if experiment.judge is None and given is None:
        if experiment.rubric is not None:
            raise UserError("--rubric is the judge's: give --judge MODEL to grade by it")
        return None
    backend = given or resolve(experiment.judge or "")
    ask = JudgeAsk(backend=backend, rubric=experiment.rubric, scenario=scenario, repeats=experiment.judge_repeats)
    made = GRADERS.get("judge")(ask)
    return dataclasses.replace(made, self_judged=made.spec == drafter.spec)


def shortfalls(experiment: Experiment, scenario: Scenario, strategy: Strategy) -> list[str]:
    """What the run gives less of than its scenario or strategy needs to do its work, each with the reason."""
    said = []
    if experiment.max_tokens < scenario.draft_tokens:
        said.append(
            f"{scenario.name}'s answers need about {scenario.draft_tokens:,} tokens and --max-tokens "
            f"{experiment.max_tokens} cuts them short; pass --max-tokens {scenario.draft_tokens}"
        )
    wanted = strategy.min_samples
    if experiment.samples < wanted:
        said.append(
            f"{experiment.strategy} needs at least {wanted} --samples to do what it is for, and was given "
            f"{experiment.samples}; pass --samples {wanted}"
        )
    return said


def check_plans(strategy: Strategy, scenario: Scenario) -> None:
    """`UserError` for a strategy that executes plans (``plan_execute``) on a scenario with no files to run over."""
    if strategy.executes_plans and not scenario.has_workspace:
        raise UserError(
            f"{strategy.name} runs each step of a plan over the task's files; scenario {scenario.name!r} has none "
            "(pipeline has)"
        )


def check_share(experiment: Experiment, strategy: Strategy) -> None:
    """`UserError` for a batch budget the strategy does not spend, two at once, or tokens too few for a draft."""
    given = (
        ("--calls-per-task", experiment.calls_per_task),
        ("--tokens-per-task", experiment.tokens_per_task),
        ("--usd-per-task", experiment.usd_per_task),
    )
    flags = [flag for flag, value in given if value is not None]
    if not flags:
        return
    if not strategy.shares_batch:
        raise UserError(
            f"{flags[0]} is the budget of a strategy that chooses its calls (adaptive); "
            f"{experiment.strategy} spends --samples drafts a round for up to --max-rounds rounds"
        )
    if len(flags) > 1:
        raise UserError(
            "give the batch's budget in calls (--calls-per-task), in tokens (--tokens-per-task) or in money "
            f"(--usd-per-task), one of them, not {' and '.join(flags)}"
        )
    tokens = experiment.tokens_per_task
    if tokens is not None and tokens < experiment.max_tokens:
        raise UserError(
            f"--tokens-per-task {tokens} cannot pay for one draft of up to --max-tokens {experiment.max_tokens} "
            "tokens (and its prompt)"
        )


def share(experiment: Experiment) -> Share | None:
    """Each task's share of the batch's budget (`check_share` has passed)."""
    if experiment.calls_per_task is not None:
        return Share(experiment.calls_per_task, "calls")
    if experiment.tokens_per_task is not None:
        return Share(float(experiment.tokens_per_task), "tokens")
    if experiment.usd_per_task is not None:
        return Share(experiment.usd_per_task, "usd")
    return None


def arbiter_settings(config: RunConfig, setup: RoleSetup | None = None) -> ArbiterSettings:
    """What every arbiter of the run is given: the strategy, K, the seed, convergence, prices, revision mode,
    and (given the resolved ``setup``) the roles whose calls pace themselves."""
    experiment = config.experiment
    return ArbiterSettings(
        paced_roles=paced_roles(setup) if setup is not None else frozenset(),
        strategy=experiment.strategy,
        samples=experiment.samples,
        seed=experiment.seed,
        repeat=experiment.repeat,
        convergence=config.convergence(),
        prices=load_prices(config.runtime.prices),
        revision_mode="patch" if experiment.patch else "rewrite",
        share=share(experiment),
        escalation=None
        if setup is None
        else escalation(load_prices(config.runtime.prices), setup.drafter, setup.escalate),
    )


def paced_roles(setup: RoleSetup) -> frozenset[RoleName]:
    """The model roles whose backend is the embedded model (or a local GGUF file): their calls fail only when
    the model stops making progress (`redraft.backends._progress`), never at the role-call deadline."""
    local = {role for role, spec in (("drafter", setup.drafter), ("critic", setup.critic)) if paces_itself(spec)}
    return frozenset(local | ({"self_critic"} if "drafter" in local else set()))  # type: ignore[arg-type]


def role_constructors(setup: RoleSetup, strategy: Strategy) -> dict[RoleName, Constructor]:
    """How each role the strategy needs is made, by role name (the grader is apart: it is not in the loop)."""
    drafts = CallSettings(setup.temperature, setup.draft_max_tokens, setup.cache, setup.prompts, setup.payer)
    roles: dict[RoleName, Constructor] = {
        "drafter": (Drafter, (setup.drafter, setup.scenario, drafts), {"escalate": setup.escalate}),
        "verifier": (
            Verifier,
            (setup.scenario, verifier_backend(setup, strategy)),
            {"cache": setup.cache, "oracle": setup.oracle, "prompts": setup.prompts, "payer": setup.payer},
        ),
    }
    critic_role = strategy.critic_role
    critiques = CallSettings(
        setup.critic_temperature, setup.critique_max_tokens, setup.cache, setup.prompts, setup.payer
    )
    if critic_role == "critic":
        roles["critic"] = (Critic, (setup.critic, critiques), {})
    elif critic_role == "self_critic":
        roles["self_critic"] = (Critic, (setup.drafter, critiques), {})
    return roles


def _versions(prompts: Prompts, judge: Prompts) -> dict[str, int]:
    """The versions of the judge's templates as the run loaded them (a prompts file may give its own)."""
    return {name: version for name, version in prompts.versions().items() if name in judge.templates}


def grader_constructor(setup: RoleSetup) -> Constructor:
    """How the run's grader is made: the judge's (``--judge``, with the run's templates), or the scenario's own
    `Grader`."""
    judge = setup.judge
    if judge is None:
        return (Grader, (setup.scenario,), {})
    made: dict[str, Any] = {"cache": setup.cache, "payer": setup.payer, "prompts": setup.prompts}
    if judge.batched:
        made["deadline_s"] = None  # a judgment waits for its batch: `--batch-wait` bounds it
    return (judge.grader, (judge.backend, *judge.args), made)


def verifier_backend(setup: RoleSetup, strategy: Strategy) -> BackendSpec | None:
    """The verifier's model: only strategies that ask it questions get one (``--verifier``, else the drafter's)."""
    if not strategy.verifier_model:
        return None
    return setup.verifier or setup.drafter


def endpoints_by_role(setup: RoleSetup, strategy: Strategy) -> dict[str, str]:
    """The backend spec each role's calls go to, by `RoleName` (to say which endpoint is down)."""
    endpoints: dict[str, str] = {
        "drafter": setup.drafter.spec,
        "critic": setup.critic.spec,
        "self_critic": setup.drafter.spec,
    }
    verifier = verifier_backend(setup, strategy)
    if verifier is not None:
        endpoints["verifier"] = verifier.spec
    if setup.judge is not None:
        endpoints["judge"] = setup.judge.spec
    return endpoints
