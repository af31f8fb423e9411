"""Run a scenario over its tasks on Ray, or refine one task in-process.

The driver only dispatches and writes: tasks are read lazily, at most
``max_in_flight`` are out at once, and each finished task's frames and result
are appended to the run directory as it lands (the driver is its single writer).
It keeps nothing per task beyond the ones in flight, so its memory stays flat
however long the run (``benchmarks/bench_batch.py`` measures it).

Every dispatched task is recorded exactly once. A task that fails (a check that
raises, a model that answers nothing, a sandbox that cannot start, a backend
error) ends alone with stop reason ``error`` and its cause; so does a task whose
arbiter call fails outright, and the run goes on. Refused credentials are the
one failure that stops the run, since every task would fail alike.

Run budgets (tokens, calls, USD, seconds) are checked before each dispatch
against everything the run directory records, earlier invocations included;
once one is spent nothing more is dispatched. Tasks in flight then finish,
except under the time budget, which is a deadline: each task is dispatched with
the time left as its timeout, so it stops there with the best of its finished
rounds.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import platform
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec

from redraft.actors.arbiter import Arbiter, ArbiterSettings
from redraft.actors.factory import RoleSetup, local_roles, ray_arbiter, ray_arbiters, ray_roles, wait_ready
from redraft.actors.prompts import prompt_versions
from redraft.backends.base import BackendSpec, resolve
from redraft.errors import AuthenticationError, UserError, describe, error_type
from redraft.pricing import load_prices
from redraft.protocols.convergence import Budget, ConvergenceConfig
from redraft.protocols.messages import Message, Result, StopLimit, Task, Usage, decode_as, encode, iter_frames
from redraft.protocols.strategies import get_strategy
from redraft.rundir import RunStore, Summary, fingerprint
from redraft.scenarios import get_scenario
from redraft.scenarios.taskfile import iter_tasks, task_file_identity, validate_task_file


class RunConfig(msgspec.Struct, kw_only=True):
    """Everything a run is made of. Fields above ``out`` enter the fingerprint."""

    scenario: str = "arithmetic"
    strategy: str = "adversarial"
    samples: int = 3
    max_rounds: int = 3
    threshold: float = 1.0
    patience: int = 2
    seed: int = 0
    drafter: str = "local"
    critic: str = "local"
    verifier: str | None = None
    temperature: float = 0.8
    max_tokens: int = 128
    task_max_tokens: int | None = None
    task_max_calls: int | None = None
    task_max_usd: float | None = None
    patch: bool = False
    """Revise with minimal search/replace edits of the best so far instead of whole rewrites."""
    tasks: str | None = None
    """A task file (JSON lines, `redraft.scenarios.taskfile`) replacing the scenario's own tasks; its path
    and the hash of its content enter the fingerprint, so a resume with another file is refused."""
    # --- not part of the fingerprint: they change how a run goes, not what it computes
    out: str | None = None
    address: str | None = None
    limit: int | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    budget_calls: int | None = None
    """Run budgets: once spent, no new task is dispatched (in-flight ones finish)."""
    budget_seconds: float | None = None
    """Run budget in wall-clock seconds, earlier invocations included: a deadline. No task is
    dispatched after it, and tasks still in flight stop at it with the best of their finished rounds."""
    task_timeout: float | None = None
    """Seconds one task may run: the convergence protocol stops it at a round boundary when another
    round would overrun, and it is cut at the limit if a round overruns anyway (reason ``budget``).
    Wall-clock limits depend on the machine's load, not on what a task computes, so like the run
    budgets they stay out of the fingerprint."""
    cache: bool = True
    """Answer repeated model calls from the response cache (`redraft.backends.cache`)."""
    prices: str | None = None
    """A JSON price file that extends or overrides the built-in table (`redraft.pricing`)."""
    max_in_flight: int | None = None
    """Tasks dispatched at once; None: 4 per node with a local model (it serves one call at
    a time, so more only delays every result), 64 with remote backends."""

    def validate(self) -> None:
        checks = [
            (self.samples >= 1, f"--samples must be at least 1, got {self.samples}"),
            (self.max_rounds >= 1, f"--max-rounds must be at least 1, got {self.max_rounds}"),
            (0.0 <= self.threshold <= 1.0, f"--threshold must be in [0, 1], got {self.threshold}"),
            (self.patience >= 1, f"--patience must be at least 1, got {self.patience}"),
            (self.limit is None or self.limit >= 1, f"--limit must be at least 1, got {self.limit}"),
            (
                self.max_in_flight is None or self.max_in_flight >= 1,
                f"--max-tasks-in-flight must be at least 1, got {self.max_in_flight}",
            ),
            (
                self.task_timeout is None or self.task_timeout > 0,
                f"--task-timeout must be more than 0 seconds, got {self.task_timeout}",
            ),
            (
                self.budget_seconds is None or self.budget_seconds > 0,
                f"--budget-seconds must be more than 0, got {self.budget_seconds}",
            ),
            (self.max_tokens >= 1, f"--max-tokens must be at least 1, got {self.max_tokens}"),
            (0.0 <= self.temperature <= 2.0, f"--temperature must be in [0, 2], got {self.temperature}"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(message)

    def identity(self) -> dict[str, Any]:
        """The fields that decide results (the fingerprint's input)."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        for volatile in (
            "out",
            "address",
            "limit",
            "budget_usd",
            "budget_tokens",
            "budget_calls",
            "budget_seconds",
            "task_timeout",
            "prices",
            "cache",
            "max_in_flight",
        ):
            data.pop(volatile)
        data["prompts"] = prompt_versions()
        if self.tasks is not None:
            data["tasks"] = task_file_identity(self.tasks)
        return data

    def convergence(self) -> ConvergenceConfig:
        return ConvergenceConfig(
            threshold=self.threshold,
            max_rounds=self.max_rounds,
            patience=self.patience,
            budget=Budget(
                max_tokens=self.task_max_tokens,
                max_calls=self.task_max_calls,
                max_usd=self.task_max_usd,
                max_seconds=self.task_timeout,
            ),
        )

    def arbiter_settings(self) -> ArbiterSettings:
        return ArbiterSettings(
            strategy=self.strategy,
            samples=self.samples,
            seed=self.seed,
            convergence=self.convergence(),
            prices=load_prices(self.prices),
            revision_mode="patch" if self.patch else "rewrite",
        )

    def run_budget_spent(self, spent: Usage, elapsed_s: float = 0.0) -> str | None:
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


BackendOverrides = dict[str, BackendSpec]
"""Per-role backend objects that replace the config's spec strings (Python API and tests)."""


def role_setup(config: RunConfig, backends: BackendOverrides | None = None) -> RoleSetup:
    """Validate the config and resolve every name in it; `UserError` on the first bad one."""
    config.validate()
    load_prices(config.prices)
    scenario = get_scenario(config.scenario)
    if config.tasks is not None:
        validate_task_file(config.tasks)  # the whole file, before any actor starts
    elif getattr(scenario, "needs_task_file", False):
        raise UserError(f"the scenario {config.scenario!r} has no tasks of its own: give --tasks FILE.jsonl")
    get_strategy(config.strategy)
    backends = backends or {}
    drafter = backends.get("drafter") or resolve(config.drafter)
    critic = backends.get("critic") or resolve(config.critic)
    verifier = backends.get("verifier") or (resolve(config.verifier) if config.verifier else None)
    return RoleSetup(
        scenario=config.scenario,
        drafter=drafter,
        critic=critic,
        verifier=verifier,
        temperature=config.temperature,
        draft_max_tokens=config.max_tokens,
        cache=config.cache,
    )


@dataclass
class Refinement:
    """One refined task: its result and every message of its trace."""

    result: Result
    trace: list[Message]


def refine(task: Task, config: RunConfig | None = None, *, backends: BackendOverrides | None = None) -> Refinement:
    """Refine one task in this process (no Ray), e.g. from a notebook. The task's scenario checks it."""
    config = msgspec.structs.replace(config or RunConfig(), scenario=task.scenario)
    setup = role_setup(config, backends)
    arbiter = Arbiter(local_roles(setup, config.strategy), config.arbiter_settings())
    frames = asyncio.run(arbiter.run(encode(task), config.task_timeout))
    trace = list(iter_frames(b"".join(frames)))
    result = trace[-1]
    assert isinstance(result, Result)
    return Refinement(result=result, trace=trace)


ProgressHook = Callable[[Result], None]


@dataclass
class RunOutcome:
    out: Path
    summary: Summary
    total: int
    """Tasks in the run (done before a resume included)."""
    skipped: int
    """Tasks already finished by an earlier invocation."""


def manifest_for(config: RunConfig, run_id: str) -> dict[str, Any]:
    identity = config.identity()
    return {
        "run_id": run_id,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": msgspec.to_builtins(config) | {"out": None},
        "identity": identity,
        "fingerprint": fingerprint(identity),
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for dist in ("redraft", "ray", "msgspec", "llama_cpp_python", "openai", "anthropic"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def plan(config: RunConfig) -> tuple[Path, Callable[[], Iterator[Task]]]:
    """Where the run writes, and a way to stream its tasks."""
    scenario = get_scenario(config.scenario)

    def tasks() -> Iterator[Task]:
        if config.tasks is not None:  # a task file, streamed; role_setup validated it
            return islice(iter_tasks(config.tasks, config.scenario), config.limit)
        return islice(scenario.tasks(seed=config.seed), config.limit)

    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    out = Path(config.out) if config.out else Path("runs") / run_id
    return out, tasks


def run(
    config: RunConfig,
    *,
    backends: BackendOverrides | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_result: ProgressHook | None = None,
) -> RunOutcome:
    """Run ``config.scenario`` on Ray (joining ``config.address`` or starting a local Ray).

    ``on_start(total, already_done)`` is called once the run directory is open;
    ``on_result`` for each task that finishes in this invocation.
    """
    setup = role_setup(config, backends)
    out, tasks = plan(config)
    store = RunStore.open(out, manifest_for(config, out.name))
    total = skipped = 0
    for task in tasks():  # one pass: how many tasks, and how many an earlier invocation finished
        total += 1
        skipped += task.task_id in store.done
    if on_start is not None:
        on_start(total, skipped)
    started = time.monotonic()
    pending = (t for t in tasks() if t.task_id not in store.done)
    _ensure_ray(config.address)
    roles = ray_roles(setup, config.strategy)
    wait_ready(roles)
    settings = config.arbiter_settings()
    arbiters = ray_arbiters(roles, settings)
    clock = _RunClock(started=started, before_s=store.wall_before, budget_s=config.budget_seconds)
    stopped_by: str | None = None
    try:
        stopped_by = _dispatch(
            pending,
            arbiters,
            lambda: ray_arbiter(roles, settings),
            store,
            config.max_in_flight or _default_in_flight(setup, len(arbiters)),
            on_result,
            budget_spent=config.run_budget_spent,
            clock=clock,
            task_timeout=config.task_timeout,
        )
    finally:  # a stopped run still leaves a consistent directory and a summary of what finished
        summary = store.finish(time.monotonic() - started, stopped_by)
    return RunOutcome(out=out, summary=summary, total=total, skipped=skipped)


def _default_in_flight(setup: RoleSetup, nodes: int) -> int:
    specs = [setup.drafter, setup.critic] + ([setup.verifier] if setup.verifier else [])
    return 4 * nodes if any(s.spec.startswith("local") for s in specs) else 64


def _ensure_ray(address: str | None) -> None:
    """Join ``address``, or start a fresh local Ray when it is None.

    ``ray.init()`` with no address would join whatever Ray it finds on the
    machine (``RAY_ADDRESS``, or a cluster recorded under /tmp/ray, even a dead
    one): a run without ``--address`` must not depend on such leftovers.
    """
    import logging

    import ray

    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": False}
    try:
        ray.init(address=address or "local", **kwargs)
    except ConnectionError as exc:
        raise UserError(f"cannot join the Ray cluster at {address}: {exc}") from None


@dataclass(frozen=True)
class _RunClock:
    """The run's wall time, earlier invocations included, and its deadline if it has a time budget."""

    started: float
    """``time.monotonic()`` when this invocation started."""
    before_s: float = 0.0
    """Wall time of earlier invocations (from the manifest)."""
    budget_s: float | None = None
    now: Callable[[], float] = time.monotonic

    def elapsed(self) -> float:
        return self.before_s + self.now() - self.started

    def task_limit(self, task_timeout: float | None) -> tuple[float | None, StopLimit]:
        """How long a task dispatched now may run, and which limit that is."""
        if self.budget_s is None:
            return task_timeout, "task_timeout"
        left = max(self.budget_s - self.elapsed(), 0.0)
        if task_timeout is None or left < task_timeout:
            return left, "run_deadline"
        return task_timeout, "task_timeout"


def _dispatch(
    tasks: Iterator[Task],
    arbiters: list[Any],
    replace: Callable[[], Any],
    store: RunStore,
    max_in_flight: int,
    on_result: ProgressHook | None,
    *,
    budget_spent: Callable[[Usage, float], str | None] = lambda _spent, _elapsed: None,
    clock: _RunClock | None = None,
    task_timeout: float | None = None,
) -> str | None:
    """Keep at most ``max_in_flight`` tasks out; write each as it lands.

    Returns why the run stopped early (a spent run budget), or None when every
    task ran. Before each dispatch the run's budgets are checked against
    everything recorded (earlier invocations included). Tasks in flight when a
    budget in tokens, calls or USD runs out finish; when the time budget runs
    out they stop at the deadline with the best of their finished rounds, since
    each was dispatched with the time left as its timeout.
    """
    import ray

    clock = clock or _RunClock(started=time.monotonic())
    in_flight: dict[Any, tuple[Task, int]] = {}
    cut = 0

    def land(ref: Any) -> None:
        nonlocal cut
        task, slot = in_flight.pop(ref)
        try:
            frames: list[bytes] = ray.get(ref)
            result = decode_as(frames[-1], Result)
        except AuthenticationError as exc:
            # Credentials refused: every task would fail alike. Stop now; finished
            # tasks are kept and a rerun with the same --out resumes after the fix.
            raise AuthenticationError(describe(exc)) from None
        except Exception as exc:  # the arbiter itself failed: account for the task anyway
            if isinstance(exc, ray.exceptions.RayActorError):
                arbiters[slot] = replace()
            result = failed_result(task, exc)
            frames = [encode(task), encode(result)]
        cut += result.stop_limit == "run_deadline"
        store.append(frames, result)
        if on_result is not None:
            on_result(result)

    def land_ready() -> None:
        """Wait for one task to finish, then land it and every other that has finished too."""
        ready, rest = ray.wait(list(in_flight), num_returns=1)
        if rest:  # one wait per finished task would cost a round trip each
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            land(ref)

    stopped_by: str | None = None
    for i, task in enumerate(tasks):
        while len(in_flight) >= max_in_flight:
            land_ready()
        stopped_by = budget_spent(store.spent, clock.elapsed())
        if stopped_by:
            break
        timeout, limit = clock.task_limit(task_timeout)
        slot = i % len(arbiters)
        in_flight[arbiters[slot].run.remote(encode(task), timeout, limit)] = (task, slot)
    while in_flight:
        land_ready()
    if cut:  # the time budget ran out with tasks in flight: they stopped early, and the run says why
        stopped_by = stopped_by or budget_spent(store.spent, clock.elapsed()) or "run budget: time"
        stopped_by += f"; {cut} task(s) in flight stopped at the deadline"
    return stopped_by


def failed_result(task: Task, exc: BaseException) -> Result:
    """The result of a task whose arbiter call failed outright: stop reason ``error``, its cause typed."""
    return Result(
        task_id=task.task_id,
        scenario=task.scenario,
        answer=None,
        text="",
        score=0.0,
        passed=False,
        initial_score=0.0,
        initial_passed=False,
        rounds=0,
        stop_reason="error",
        usage=Usage(),
        wall_s=0.0,
        error=describe(exc),
        error_type=error_type(exc),
    )
