"""Prompts are ordered for the providers' caches: per role and kind of call, a task's requests share a stable
prefix byte for byte (the system message, the instructions, the task), and what changes comes after it.

"Stable prefix" is `ChatRequest.stable_prefix`: every message before the last and the last's first
``stable_chars`` characters. Each case runs one task's loop in this process with scripted models that record
every request, and checks, per role and system message (a role's kinds of call, such as a draft and a
reflection, each have their own), that the prefix is the same in every request, holds the task as its only
fenced text (so it ends after the task, before any candidate, feedback or critique), and that the requests
do differ after it (so the check compares something that changes).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from string import Template

import pytest

from redraft import RunConfig
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._refine import local_roles, refine_trace
from redraft.engine.arbiter import Arbiter
from redraft.engine.grader import Grader
from redraft.engine.prompts import fenced, task_cache_key
from redraft.engine.resolution import Cast, arbiter_settings, resolve_run
from redraft.protocols.messages import Result, Task
from redraft.scenarios import get_scenario
from redraft.strategies import get_strategy
from tests.support.replies import request_kind
from tests.unit.engine.test_held_out import any_reply

Recorded = dict[str, list[ChatRequest]]


def run_recording(task: Task, strategy: str) -> Recorded:
    """One task's loop; the requests each role's model received, by role."""
    requests: Recorded = defaultdict(list)

    def model_of(role: str) -> ScriptedSpec:
        def model(request: ChatRequest) -> str:
            requests[role].append(request)
            reply = any_reply(request)
            # Each draft differs, so the critic's candidates change and no task stops as stable.
            return reply if request_kind(request) != "draft" else f"Try {len(requests[role])}.\n{reply}"

        return ScriptedSpec(script=model)

    config = RunConfig.build(scenario=task.scenario, strategy=strategy, samples=2, max_rounds=3, patience=5)
    backends = {role: model_of(role) for role in ("drafter", "critic", "verifier")}
    setup = resolve_run(config, backends=backends).setup
    arbiter = Arbiter(local_roles(Cast.of(setup, get_strategy(strategy))), arbiter_settings(config))
    trace = asyncio.run(refine_trace(arbiter, Grader(setup.scenario), task, oracle=False))
    assert isinstance(trace[-1], Result)
    return requests


def first_task(scenario: str) -> Task:
    return next(iter(get_scenario(scenario).tasks(seed=0))).without_gold()


CASES = [
    ("adversarial", "arithmetic", {"drafter", "critic"}),
    ("self_refine", "arithmetic", {"drafter"}),  # its critic is the drafter's model
    ("debate", "arithmetic", {"drafter", "critic"}),
    ("verifier_only", "arithmetic", {"drafter"}),
    ("cove", "arithmetic", {"drafter", "verifier"}),
    ("none", "arithmetic", set()),
    ("best_of_n", "arithmetic", set()),
    ("self_consistency", "arithmetic", set()),
    ("stepwise", "constrained_writing", {"drafter"}),
    ("adversarial", "incident", {"drafter", "critic"}),
]
"""Strategy, scenario, and the roles whose calls must repeat a prefix (a strategy that samples once per task
sends one prompt, the same for every sample: nothing changes after its prefix)."""


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("strategy", "scenario", "repeating"), CASES, ids=[f"{s}-{n}" for s, n, _ in CASES])
def test_a_task_s_requests_share_a_stable_prefix_per_role_and_end_it_after_the_task(
    strategy: str, scenario: str, repeating: set[str]
) -> None:
    task = first_task(scenario)
    recorded = run_recording(task, strategy)
    assert recorded["drafter"], "the drafter was called"
    compared = set()
    for role, requests in recorded.items():
        by_system: dict[str, list[ChatRequest]] = defaultdict(list)
        for request in requests:
            assert request.cache_key == task_cache_key(task.task_id)  # every call of the task, one cache key
            by_system[request.messages[0].content].append(request)
        for system, group in by_system.items():
            prefixes = {tuple(request.stable_prefix()) for request in group}
            assert len(prefixes) == 1, f"{role}: {len(prefixes)} different stable prefixes"
            [prefix] = prefixes
            assert prefix[0].role == "system" and prefix[0].content == system
            assert fenced(prefix[-1].content) == [task.prompt], f"{role}: the prefix ends after the task, not before"
            if len({request.messages[-1].content for request in group}) > 1:
                compared.add(role)
    assert compared >= repeating, f"no role of {sorted(repeating - compared)} sent two different prompts"


def test_plan_execute_s_asks_share_a_prefix_per_kind_of_ask() -> None:
    from tests.support.plan_scripts import Discovering

    task = first_task("pipeline")
    requests: list[ChatRequest] = []
    drafter = Discovering()

    def model(request: ChatRequest) -> str:
        requests.append(request)
        return drafter(request)

    config = RunConfig.build(scenario="pipeline", strategy="plan_execute", max_rounds=12)
    setup = resolve_run(config, backends={"drafter": ScriptedSpec(script=model)}).setup
    arbiter = Arbiter(local_roles(Cast.of(setup, get_strategy("plan_execute"))), arbiter_settings(config))
    asyncio.run(refine_trace(arbiter, Grader(setup.scenario), task, oracle=False))
    by_system: dict[str, set[tuple[object, ...]]] = defaultdict(set)
    for request in requests:
        by_system[request.messages[0].content].add(tuple(request.stable_prefix()))
        assert fenced(request.stable_prefix()[-1].content) == [task.prompt]
    assert len(requests) > len(by_system) >= 2 and all(len(p) == 1 for p in by_system.values())


def test_the_stable_part_of_a_template_ends_at_its_first_changing_field_wherever_a_prompts_file_puts_it() -> None:
    from redraft.engine.prompts import Prompts, _Template, built_in

    fields = {"task": "Add 2 and 2.", "candidate": "Answer: 5"}
    prompts = built_in()
    rendered = prompts.render("critic_user", **fields)
    end = prompts.stable_length("critic_user", {"candidate"}, **fields)
    assert fenced(rendered[:end]) == [fields["task"]] and rendered[end:].startswith("[BEGIN ")
    moved = Prompts(
        prompts.templates | {"critic_user": _Template(9, Template("$candidate then $task"), frozenset(fields))}
    )
    assert moved.stable_length("critic_user", {"candidate"}, **fields) == 0
    assert prompts.stable_length("draft_task", set(), task="x") == len(prompts.render("draft_task", task="x"))


def test_the_caching_hints_change_no_response_cache_key() -> None:
    from redraft.backends.cache import ResponseCache
    from redraft.protocols.messages import ChatMessage

    plain = ChatRequest(messages=[ChatMessage(role="user", content="hi")])
    hinted = ChatRequest(messages=plain.messages, stable_chars=2, cache_key="redraft-x")
    assert ResponseCache.key("openai:m", plain) == ResponseCache.key("openai:m", hinted)
    assert ResponseCache.key("openai:m", plain) != ResponseCache.key("openai:m", ChatRequest(messages=[]))
