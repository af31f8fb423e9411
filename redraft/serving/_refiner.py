"""Each request a task of the engine: the same roles, strategies, arbiter and convergence as ``redraft run``.

A replica keeps one engine per distinct run configuration a request asks for (strategy, models, check, samples,
rounds, budget, max tokens), made on the first request that asks for it and kept for the next ones: nothing is
started per request. The engines kept are bounded (`KEPT_ARBITERS`, the least recently used let go). Where the
loop runs is the `Engines` the replica is given: on Ray Serve, a lease on the cluster's role actors
(`redraft.actors.FleetArbiters`), so requests share the endpoint limiter, the response cache and the prices
with every run; in one process (``--in-process``, tests), an `Arbiter` over roles of this process
(`LocalArbiters`, as `redraft.refine` does). Both give the same answers.

A request's settings are the server's run options (`ServeSettings.run`) with what the request changes, resolved
by `redraft.engine.resolution.resolve_run` like any run's: a bad name or value is a `UserError`, which the app
answers as a 400.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from redraft.config import RunConfig
from redraft.engine import Arbiter, Checkpoint, local_roles
from redraft.engine.resolution import ResolvedRun, resolve_run
from redraft.errors import UserError
from redraft.protocols.messages import Result, Task
from redraft.scenarios import provide, scenario_names
from redraft.scenarios.user_check import user_scenario_name
from redraft.serving._chat import CHAT, Conversation, prompt_of
from redraft.serving._journal import Journal
from redraft.serving._openai import APIError, ChatRequest
from redraft.serving._requested import check_named, check_own_priced, named_model
from redraft.serving._routes import Route
from redraft.serving._settings import ServeSettings

KEPT_ARBITERS = 64


class Engine(Protocol):
    """One run configuration's loop: a task's checkpoints, a finished round each (`redraft.engine.Arbiter`'s)."""

    def refine(self, task: Task, timeout_s: float | None = None) -> AsyncIterator[Checkpoint]: ...


class Engines(Protocol):
    """Where a replica's loops run: an `Engine` made per run configuration, let go, and all stopped at the end."""

    def make(self, run: ResolvedRun) -> Any: ...

    def release(self, engine: Any) -> None: ...

    def close(self) -> None: ...


class LocalArbiters:
    """`Engines` in this process: an `Arbiter` over roles of the process per configuration (``--in-process``)."""

    def make(self, run: ResolvedRun) -> Arbiter:
        return Arbiter(local_roles(run.cast, run.settings), run.settings)

    def release(self, engine: Any) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Notice:
    """What the server tells a client (in the response's ``redraft.warnings``) and its log of a request it
    serves as asked but that cannot do what its strategy is for."""

    code: Literal["no_check"]
    message: str


@dataclass(frozen=True)
class Prepared:
    """A request ready to run: its engine, and its task."""

    arbiter: Engine
    task: Task
    strategy: str
    notices: tuple[Notice, ...] = ()


class Refiner:
    """A replica's engine: arbiters made once per configuration, each request's loop, its trace written."""

    def __init__(self, settings: ServeSettings, engines: Engines | None = None) -> None:
        provide(Conversation())
        self.settings = settings
        self.engines: Engines = engines or LocalArbiters()
        self.base = RunConfig.build(**settings.run).replace(scenario=CHAT)
        base = resolve_run(self.base, task=Task(task_id="-", scenario=CHAT, prompt=""))  # bad options fail here
        if settings.usd_per_period is not None:
            check_own_priced(base)
        experiment = self.base.experiment
        self.own_models = frozenset(
            m for m in (experiment.drafter, experiment.critic, experiment.verifier, experiment.escalate) if m
        ) | frozenset(target.split("/", 2)[2] for target in settings.aliases.values() if target.count("/") >= 2)
        self.journal = Journal(Path(settings.out) if settings.out else None, lambda name: _manifest(base, name))
        self.known_checks = sorted(settings.checks) + [n for n in scenario_names() if ":" not in n]
        """What a request may name as its check (listing the scenarios loads them: once, as the server starts)."""
        self._arbiters: OrderedDict[tuple[tuple[str, Any], ...], tuple[Engine, tuple[Notice, ...]]] = OrderedDict()

    def prepare(self, route: Route, request: ChatRequest) -> Prepared:
        """The arbiter and the task of ``request``; `APIError` 400 for a setting it may not ask."""
        changes = self._changes(route, request)
        key = tuple(sorted(changes.items()))
        scenario = str(changes["scenario"])
        if key not in self._arbiters:
            run = self._resolved(changes, _named(route, request))
            self._arbiters[key] = (self.engines.make(run), self._notices(run))
            while len(self._arbiters) > KEPT_ARBITERS:
                self.engines.release(self._arbiters.popitem(last=False)[1][0])
        self._arbiters.move_to_end(key)
        task = Task(
            task_id="chatcmpl-" + uuid.uuid4().hex[:24],
            scenario=scenario,
            prompt=prompt_of(request.messages),
            reference=dict(request.redraft.data),
        )
        engine, notices = self._arbiters[key]
        return Prepared(engine, task, route.strategy, notices)

    async def refine(self, prepared: Prepared) -> AsyncIterator[Checkpoint]:
        """The request's loop, a checkpoint per finished round, cut at the server's request timeout."""
        async for checkpoint in prepared.arbiter.refine(prepared.task, self.settings.request_timeout_s):
            yield checkpoint

    def _changes(self, route: Route, request: ChatRequest) -> dict[str, Any]:
        """The run settings the request changes over the server's (always its strategy and its scenario)."""
        asked = request.redraft
        s = self.settings
        changes: dict[str, Any] = {"strategy": route.strategy, "scenario": self._scenario(asked.check)}
        if route.model:
            changes |= {"drafter": route.model, "critic": route.model}
        if asked.critic:
            changes["critic"] = named_model(asked.critic, self.own_models, "redraft.critic")
        limits = (("samples", asked.samples, s.max_samples), ("max_rounds", asked.rounds, s.max_rounds))
        for name, value, most in (*limits, ("max_tokens", request.token_limit, s.max_tokens)):
            if value is None:
                continue
            if not 1 <= value <= most:
                param = {"samples": "redraft.samples", "max_rounds": "redraft.rounds"}.get(name, "max_tokens")
                raise APIError(400, f"{param} must be between 1 and {most} on this server, got {value}", param=param)
            changes[name] = value
        if request.temperature is not None:
            changes["temperature"] = request.temperature
        budget = asked.budget
        if budget is not None:
            spends = {
                "task_budget_usd": budget.usd,
                "task_budget_calls": budget.calls,
                "task_budget_tokens": budget.tokens,
            }
            changes |= {name: value for name, value in spends.items() if value is not None}
        return changes

    def _notices(self, run: ResolvedRun) -> tuple[Notice, ...]:
        """A revising strategy with no check: every answer scores 0, so nothing tells a revision it helped, and the
        loop runs to its rounds or patience; the client is told, and what it could name."""
        if run.scenario.name != CHAT or not run.strategy.revises:
            return ()
        strategy = run.strategy.name
        known = self.known_checks
        return (
            Notice(
                "no_check",
                f"the request names no check, so every answer scores 0 and {strategy} revises blind until its "
                f"rounds or patience run out; name one in redraft.check (known: {', '.join(known)}), or ask "
                "redraft/none for a single answer",
            ),
        )

    def _scenario(self, check: str | None) -> str:
        if check is None:
            return CHAT
        if check in self.settings.checks:
            return user_scenario_name(self.settings.checks[check])
        if ":" not in check and check in scenario_names():
            return check
        known = sorted(self.settings.checks) + [n for n in scenario_names() if ":" not in n]
        raise APIError(400, f"unknown check {check!r} (known: {', '.join(known)})", param="redraft.check")

    def _resolved(self, changes: dict[str, Any], named: dict[str, str]) -> ResolvedRun:
        """The run ``changes`` make; `APIError` 400 for a bad one, or a model ``named`` by the request that it may
        not have called (`redraft.serving._requested.check_named`)."""
        try:
            config = self.base.replace(**changes)
            run = resolve_run(config, task=Task(task_id="-", scenario=str(changes["scenario"]), prompt=""))
        except UserError as exc:
            raise APIError(400, str(exc)) from None
        check_named(run, named, self.own_models, self.settings.usd_per_period is not None)
        return run


def _named(route: Route, request: ChatRequest) -> dict[str, str]:
    """The roles whose model the request names (role -> spec), the critic's own over the route's."""
    named = {"drafter": route.model, "critic": route.model} if route.model else {}
    return named | ({"critic": request.redraft.critic} if request.redraft.critic else {})


def _manifest(base: ResolvedRun, name: str) -> dict[str, Any]:
    """A replica's run directory's manifest: the server's own run settings, the requests' defaults."""
    return base.manifest() | {"run_id": name, "served": True}


def final_result(trace: list[Any]) -> Result:
    result = trace[-1]
    assert isinstance(result, Result)
    return result
