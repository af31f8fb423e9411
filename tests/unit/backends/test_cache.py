"""The response cache: a call already answered is not made again; distinct samples stay distinct."""

from __future__ import annotations

import multiprocessing
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, refine
from redraft.backends.base import ChatRequest, Completion
from redraft.backends.cache import ResponseCache
from redraft.protocols.messages import ChatMessage, Usage
from redraft.scenarios import get_scenario
from tests.support.replies import CountingSpec, LateLearner

TASK = next(islice(get_scenario("arithmetic").tasks(seed=0), 1))


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDRAFT_CACHE_DIR", str(tmp_path / "cache"))


def refine_counting(spec: CountingSpec, **config: object):  # type: ignore[no-untyped-def]
    return refine(TASK, RunConfig.build(samples=3, max_rounds=3, **config), backends={"drafter": spec, "critic": spec})  # type: ignore[arg-type]


def test_a_repeated_run_is_answered_from_the_cache() -> None:
    spec = CountingSpec(reply=LateLearner(fix_at=1))
    first = refine_counting(spec).result
    paid = len(spec.calls)
    assert paid == first.usage.calls > 0 and first.usage.cache_hits == 0
    second = refine_counting(spec).result
    assert len(spec.calls) == paid  # not one request reached the backend again
    assert second.usage.cache_hits == second.usage.calls == first.usage.calls
    # The same usage as when it was paid for: totals of a resumed run equal an uninterrupted one.
    assert (second.usage.input_tokens, second.usage.output_tokens) == (
        first.usage.input_tokens,
        first.usage.output_tokens,
    )
    assert (second.answer, second.passed, second.rounds) == (first.answer, first.passed, first.rounds)


def test_distinct_samples_are_distinct_calls() -> None:
    spec = CountingSpec(reply=LateLearner(fix_at=0))
    refine_counting(spec)
    seeds = [r.seed for r in spec.calls if r.json_schema is None]
    assert len(seeds) == 3 and len(set(seeds)) == 3


def test_no_cache_pays_again() -> None:
    spec = CountingSpec(reply=LateLearner(fix_at=1))
    refine_counting(spec, cache=False)
    paid = len(spec.calls)
    refine_counting(spec, cache=False)
    assert len(spec.calls) == 2 * paid


def test_key_covers_backend_messages_and_sampling(tmp_path: Path) -> None:
    request = ChatRequest(messages=[ChatMessage(role="user", content="hi")], temperature=0.5, seed=1)
    key = ResponseCache.key("local", request)
    assert key == ResponseCache.key(
        "local", ChatRequest(messages=[ChatMessage(role="user", content="hi")], temperature=0.5, seed=1)
    )
    variants = [
        ResponseCache.key("openai:gpt-4o", request),
        ResponseCache.key(
            "local", ChatRequest(messages=[ChatMessage(role="user", content="hi!")], temperature=0.5, seed=1)
        ),
        ResponseCache.key("local", ChatRequest(messages=request.messages, temperature=0.7, seed=1)),
        ResponseCache.key("local", ChatRequest(messages=request.messages, temperature=0.5, seed=2)),
        ResponseCache.key("local", ChatRequest(messages=request.messages, temperature=0.5, seed=1, max_tokens=9)),
        ResponseCache.key("local", ChatRequest(messages=request.messages, temperature=0.5, seed=1, json_schema={})),
    ]
    assert len({key, *variants}) == 1 + len(variants)


def test_scripted_doubles_are_never_cached() -> None:
    from redraft.backends.cache import CachedBackend, cached
    from redraft.backends.scripted import ScriptedBackend

    assert not isinstance(cached(ScriptedBackend(["x"]), "scripted", enabled=True), CachedBackend)
    assert isinstance(cached(ScriptedBackend(["x"]), "local", enabled=True), CachedBackend)


def _open_after(barrier: Any, path: str, errors: Any) -> None:
    barrier.wait()
    try:
        cache = ResponseCache(Path(path))
        cache.put("k", Completion(text="x", usage=Usage(calls=1), model="m", finish_reason="stop", latency_s=0.0))
        assert cache.get("k") is not None
    except Exception as exc:  # reported to the parent, which asserts there are none
        errors.put(repr(exc))


def test_actors_opening_a_new_cache_at_once_all_get_it(tmp_path: Path) -> None:
    # Role actors start in parallel, so on a fresh node a dozen processes create the file together;
    # SQLite refuses the WAL switch to all but one without waiting (seen in CI as an actor that
    # could not start). Without taking turns, about one trial in three here loses an opener.
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    for trial in range(40):
        barrier = context.Barrier(12)
        path = str(tmp_path / f"trial{trial}" / "responses.sqlite")
        openers = [context.Process(target=_open_after, args=(barrier, path, errors)) for _ in range(12)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
        assert [opener.exitcode for opener in openers] == [0] * 12
    assert errors.empty(), errors.get()
