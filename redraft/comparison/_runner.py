"""Running a comparison: every arm, and one sampling baseline, over the same tasks on one Ray cluster.

Each arm (and each repeat of it) is an ordinary run with its own resumable run
directory under the comparison's ``--out``: ``arms/<name>`` (``arms/<name>@r<k>``
for repeat k), and ``baseline`` for the sampling baseline. The lanes run side by
side, each with an equal share of the tasks in flight, so task i of every arm is
refined at about the same time (the same tasks: their hidden parts seeded with the one secret the
comparison's directory keeps, `redraft.rundir.RunSecret`): drift in the backend, rate limits and the load
of the machine fall on every arm alike. The lanes share one fleet of role actors
(`redraft.actors.Fleets`), started with the first lane and stopped when the comparison
ends, so a lane starts no actor of its own. Rerunning the same comparison resumes
every lane; a finished lane costs nothing.

The baseline is one run of K = N independent samples per task (no critic, no
revision): both sampling baselines, best-of-n and self-consistency, are computed
from it at any budget up to N (`redraft.stats`), so every arm is a
point against two curves and no baseline is run per arm.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redraft.actors import EndpointHook, EndpointState, Fleets, RunHooks, RunOutcome, ensure_ray, run_resolved
from redraft.comparison._arms import Arm
from redraft.config import DEFAULT_BASELINE_SAMPLES, RunConfig
from redraft.engine.resolution import BackendOverrides, ResolvedRun, resolve_run, shares_batch
from redraft.errors import Interrupted, UserError
from redraft.protocols.messages import Result
from redraft.rundir import COMPARISON, RunSecret, WriterLock, check_kind, check_wire, hold
from redraft.rundir.layout import RAY_LOG

BASELINE = "baseline"
DEFAULT_IN_FLIGHT = 8
"""Tasks in flight across all lanes when the comparison does not say."""


@dataclass(frozen=True)
class Lane:
    """One run of the comparison: an arm and repeat, or the baseline."""

    label: str
    """``arms/adversarial``, ``arms/adversarial@r1``, ``baseline``: its folder under ``--out``."""
    arm: str
    repeat: int
    config: RunConfig


def lanes_in(out: Path) -> dict[str, list[Path]]:
    """The run directories under a comparison's directory ``out``, by arm (repeats in order; the baseline's as
    `BASELINE`): read from the folders, so a comparison is read without its plan."""
    found: dict[str, list[tuple[int, Path]]] = {}
    for folder in sorted((out / "arms").glob("*")):
        name, _, repeat = folder.name.rpartition("@r")
        if not (name and repeat.isdigit()):
            name, repeat = folder.name, "0"
        if folder.is_dir():
            found.setdefault(name, []).append((int(repeat), folder))
    if (out / BASELINE).is_dir():
        found[BASELINE] = [(0, out / BASELINE)]
    return {arm: [folder for _, folder in sorted(lanes)] for arm, lanes in found.items()}


@dataclass(frozen=True)
class ComparePlan:
    """Everything a comparison runs."""

    base: RunConfig
    """The shared settings: scenario or task file, models, budgets, limit, address."""
    arms: list[Arm]
    out: Path
    baseline_samples: int = DEFAULT_BASELINE_SAMPLES
    repeats: int = 1

    def held(self) -> WriterLock:
        """The comparison's directory held for writing while its lanes run and its files are written (release it,
        or use it as a context manager): a new, empty or comparison's directory only, one comparison at a time."""
        check_kind(self.out, COMPARISON)
        return hold(self.out)

    def lanes(self) -> list[Lane]:
        """Every run, interleaved arm by arm within each repeat; the baseline last."""
        shared_in_flight = self.base.runtime.max_tasks_in_flight or DEFAULT_IN_FLIGHT
        lanes_count = len(self.arms) * self.repeats + 1
        per_lane = max(1, shared_in_flight // lanes_count)
        lanes = []
        for repeat in range(self.repeats):
            for arm in self.arms:
                label = f"arms/{arm.name}" + (f"@r{repeat}" if repeat else "")
                settings = {**_budget(self.base, arm.settings), **arm.settings}
                config = self.base.replace(
                    **settings, repeat=repeat, out=str(self.out / label), max_tasks_in_flight=per_lane
                )
                lanes.append(Lane(label=label, arm=arm.name, repeat=repeat, config=config))
        baseline = self.base.replace(
            strategy="self_consistency",
            samples=self.baseline_samples,
            max_rounds=1,
            calls_per_task=None,
            tokens_per_task=None,
            usd_per_task=None,
            escalate=None,
            out=str(self.out / BASELINE),
            max_tasks_in_flight=per_lane,
        )
        lanes.append(Lane(label=BASELINE, arm=BASELINE, repeat=0, config=baseline))
        return lanes

    def resolved(self, backends: BackendOverrides | None = None) -> list[tuple[Lane, ResolvedRun]]:
        """Every lane, resolved once, before anything runs; `UserError` naming the arm.

        Each lane is resolved as `redraft run` resolves its config (bounds, then every name in it: strategy,
        scenario, the backend specs ``backends`` does not replace, prompts file), so an arm that would fail
        does not wait for the others to run. Every lane's generated tasks are seeded with the one secret the
        comparison's directory keeps, so its arms see the same tasks.
        The comparison's directory is a new, empty or comparison's one (`redraft.rundir.check_kind`), checked
        before anything is made in it.
        """
        check_kind(self.out, COMPARISON)
        if self.repeats < 1:
            raise UserError(f"--repeats must be at least 1, got {self.repeats}")
        if not 2 <= self.baseline_samples <= 256:
            raise UserError(f"the baseline's samples must be in [2, 256], got {self.baseline_samples}")
        made = []
        secret = RunSecret(self.out)
        for lane in self.lanes():
            try:
                made.append((lane, resolve_run(lane.config, backends=backends, secret=secret)))
            except UserError as exc:
                raise UserError(f"arm {lane.arm!r}: {exc}") from None
        return made


StartHook = Callable[[str, int, int], None]
"""(lane label, its tasks, how many an earlier invocation finished)."""
ResultHook = Callable[[str, Result], None]


def run_comparison(
    plan: ComparePlan,
    *,
    backends: BackendOverrides | None = None,
    on_start: StartHook | None = None,
    on_result: ResultHook | None = None,
    stop: threading.Event | None = None,
    on_endpoints: EndpointHook | None = None,
) -> dict[str, RunOutcome]:
    """Run every lane side by side; their outcomes by label.

    A lane that fails stops the others (``stop``: they would pay for a comparison that cannot finish), and its
    error is raised once all have ended. Setting ``stop`` from outside (a signal) ends every lane within a
    second: `Interrupted`, counting the tasks done over all lanes.
    """
    lanes = plan.resolved(backends)
    for _, resolved in lanes:  # a lane a pre-release redraft wrote: refused in one line, before Ray starts
        check_wire(resolved.out)
    stop = stop or threading.Event()
    fleets = Fleets()  # one for the lanes (a bad REDRAFT_FLEET is refused here, before Ray starts)
    # Once, before the lanes' threads (ray.init is not for racing); Ray's own messages to the comparison's log.
    ensure_ray(plan.base.runtime.address, log=plan.out / RAY_LOG, verbose=plan.base.runtime.verbose)
    lock = threading.Lock()

    def one(lane: Lane, resolved: ResolvedRun) -> RunOutcome:
        def started(total: int, done: int) -> None:
            if on_start is not None:
                with lock:
                    on_start(lane.label, total, done)

        def landed(result: Result) -> None:
            if on_result is not None:
                with lock:
                    on_result(lane.label, result)

        def endpoints(states: list[EndpointState]) -> None:  # every lane sees the same limiters
            if on_endpoints is not None:
                with lock:
                    on_endpoints(states)

        try:
            hooks = RunHooks(started, landed, endpoints, stop=stop, fleets=fleets, cpu_share=share)
            return run_resolved(resolved, hooks)
        except BaseException:
            stop.set()
            raise

    # Side by side: each lane's checking actors reserve their share of each node's CPU (with one fleet for the
    # lanes, theirs is one actor per node, shared).
    share = 1.0 / len(lanes) if not fleets.shared else 1.0
    try:
        with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="redraft-lane") as pool:
            futures = [(lane.label, pool.submit(one, lane, resolved)) for lane, resolved in lanes]
    finally:
        fleets.shutdown()
    return _outcomes(futures)


def _outcomes(futures: list[tuple[str, Future[RunOutcome]]]) -> dict[str, RunOutcome]:
    """Each lane's outcome by label; a lane's real error before an interruption, which counts every lane."""
    outcomes: dict[str, RunOutcome] = {}
    errors: list[BaseException] = []
    for label, future in futures:
        error = future.exception()
        if error is not None:
            errors.append(error)
        else:
            outcomes[label] = future.result()
    stopped = [e for e in errors if isinstance(e, Interrupted)]
    if errors and len(stopped) < len(errors):
        raise next(e for e in errors if not isinstance(e, Interrupted))
    if stopped:
        done = sum(e.done for e in stopped) + sum(o.total for o in outcomes.values())
        total = sum(e.total for e in stopped) + sum(o.total for o in outcomes.values())
        raise Interrupted(
            f"interrupted: {done} of {total} tasks done over the comparison's lanes", done=done, total=total
        )
    return outcomes


def _budget(base: RunConfig, arm: dict[str, Any]) -> dict[str, Any]:
    """``--calls-per-task`` (``--tokens-per-task``, ``--usd-per-task``) is the budget of the arms whose strategy
    chooses its calls (``adaptive``), and ``--escalate`` one of their actions; an arm of another strategy runs
    without them, as that strategy would (an arm that sets one itself is checked as set)."""
    e = base.experiment
    if (e.calls_per_task, e.tokens_per_task, e.usd_per_task, e.escalate) == (None, None, None, None):
        return {}
    try:
        spends = shares_batch(arm.get("strategy", base.experiment.strategy))
    except UserError:
        return {}  # an unknown strategy: `ComparePlan.validate` names the arm
    return {} if spends else {"calls_per_task": None, "tokens_per_task": None, "usd_per_task": None, "escalate": None}
