"""What the response cache's answers cost: a call another run paid for costs this run nothing and is shown as
saved by the cache; a call this run paid for before it was interrupted costs what it cost, so a resumed run's
figures equal an uninterrupted one's. Every call is priced by one table (`PriceTable.priced`), here with a fake
model priced as gpt-4o-mini ($0.15 in, $0.60 out per million tokens)."""

from __future__ import annotations

import asyncio
from itertools import islice
from pathlib import Path

import msgspec
import pytest

from redraft.backends.base import ChatRequest
from redraft.backends.cache import CachedBackend, ResponseCache
from redraft.backends.pricing import default_prices
from redraft.backends.scripted import ScriptedBackend, ScriptedSpec
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.resolution import Cast, RoleSetup
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import ChatMessage, Result, Usage
from redraft.rundir.summary import summarize
from redraft.scenarios import get_scenario
from redraft.strategies import get_strategy
from redraft.views.summary_table import summary_rows
from tests.support.replies import LateLearner

TASK = next(islice(get_scenario("arithmetic").tasks(seed=0), 1))
PRICED = ScriptedSpec(script=LateLearner(fix_at=1), spec="fake:gpt-4o-mini", model="gpt-4o-mini")
"""A cacheable spec (not ``scripted``) whose replies are priced as gpt-4o-mini's."""


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDRAFT_CACHE_DIR", str(tmp_path / "cache"))


def refined(payer: str) -> Result:
    """The task refined by a run whose calls are ``payer``'s, through the real arbiter and roles."""
    setup = RoleSetup(scenario="arithmetic", drafter=PRICED, critic=PRICED, payer=payer)
    settings = ArbiterSettings(samples=2, convergence=ConvergenceConfig(max_rounds=3))
    trace = asyncio.run(
        Arbiter(local_roles(Cast.of(setup, get_strategy(settings.strategy))), settings).run(TASK.without_gold())
    )
    result = trace[-1]
    assert isinstance(result, Result)
    return result


def dollars(usage: Usage) -> float:
    """gpt-4o-mini's list price of these tokens."""
    return (usage.input_tokens * 0.15 + usage.output_tokens * 0.60) / 1e6


def test_the_table_prices_a_call_and_what_the_cache_saved_of_it() -> None:
    prices = default_prices()
    paid = prices.priced("gpt-4o-mini", Usage(input_tokens=1_000, output_tokens=500, calls=1))
    assert (paid.cost_usd, paid.saved_usd, paid.spent_usd) == (450 / 1e6, 0.0, 450 / 1e6)
    hit = prices.priced(
        "gpt-4o-mini", Usage(input_tokens=1_000, output_tokens=500, calls=1, cache_hits=1, saved_calls=1)
    )
    assert (hit.cost_usd, hit.saved_usd, hit.spent_usd) == (450 / 1e6, 450 / 1e6, 0.0)
    assert prices.priced("my-own-model", Usage(input_tokens=1_000, calls=1)).cost_usd == 0.0
    assert not prices.known("my-own-model") and prices.known("gpt-4o-mini-2024-07-18") and prices.known("x.gguf")


def test_a_new_run_answered_by_the_cache_spends_nothing_and_says_what_the_cache_saved() -> None:
    first = refined(payer="run-a")
    cost = dollars(first.usage)
    assert first.usage.calls > 0 and first.usage.cache_hits == first.usage.saved_calls == 0
    assert first.usage.cost_usd == pytest.approx(cost, rel=1e-12) and first.usage.spent_usd == first.usage.cost_usd
    again = refined(payer="run-b")  # another run directory: run-a paid for every call it asks
    assert again.usage.cache_hits == again.usage.saved_calls == again.usage.calls == first.usage.calls
    assert again.usage.saved_usd == pytest.approx(cost, rel=1e-12) and again.usage.spent_usd == 0.0
    assert again.usage.cost_usd == first.usage.cost_usd  # the calls the results rest on cost the same
    for role, usage in again.usage_by_role.items():
        assert usage.spent_usd == 0.0 and usage.saved_usd == first.usage_by_role[role].cost_usd
    rows = dict(summary_rows(summarize([again], wall_s=1.0), breakdowns=True))
    calls = first.usage.calls
    assert rows["model calls"] == f"{calls} ({calls} from the cache)"
    assert rows["spent"] == "$0.0000 paid by this run"
    assert rows["saved by the cache"] == f"${cost:,.4f} ({calls} calls paid by others)"
    assert rows["cost of the calls"] == f"${cost:,.4f}, every call at list price"


def test_a_resumed_run_answered_by_its_own_calls_counts_them_as_spent_as_before() -> None:
    first = refined(payer="run-a")
    resumed = refined(payer="run-a")  # the same run directory, asking again what it paid for before a stop
    assert resumed.usage.cache_hits == resumed.usage.calls and resumed.usage.saved_calls == 0
    assert resumed.usage.spent_usd == resumed.usage.cost_usd == first.usage.cost_usd
    rows = dict(summary_rows(summarize([resumed], wall_s=1.0), breakdowns=False))
    assert rows["spent"] == f"${first.usage.cost_usd:,.4f} paid by this run" and "saved by the cache" not in rows


def test_an_entry_whose_payer_is_unknown_is_saved_whoever_asks(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    request = ChatRequest(messages=[ChatMessage(role="user", content="Add 2 and 3.")], seed=1)
    backend = CachedBackend(ScriptedBackend(["five"], model="gpt-4o-mini"), "fake", cache, payer="")
    paid = asyncio.run(backend.complete(request))
    assert paid.usage.cache_hits == 0 and cache.get(ResponseCache.key("fake", request)) == (paid, "")
    for payer in ("", "run-a"):
        hit = asyncio.run(CachedBackend(ScriptedBackend([]), "fake", cache, payer=payer).complete(request))
        assert (hit.text, hit.usage.cache_hits, hit.usage.saved_calls) == ("five", 1, 1)


def test_a_cache_a_pre_release_redraft_made_is_made_anew(tmp_path: Path) -> None:
    """Its table has no payer column: it is only a cache, so it is dropped and made again (its calls paid once
    more), never read with payers it does not have, and nothing fails."""
    import sqlite3

    from redraft.backends.base import Completion
    from redraft.backends.cache import _encoder

    path = tmp_path / "responses.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, completion BLOB)")
    kept = Completion(text="x", usage=Usage(calls=1), model="m", finish_reason="stop", latency_s=0.0)
    old.execute("INSERT INTO responses VALUES (?, ?)", ("k", _encoder.encode(kept)))
    old.commit()
    old.close()
    cache = ResponseCache(path)
    assert cache.get("k") is None
    cache.put("k2", kept, "run-a")
    assert cache.get("k2") == (kept, "run-a")
    assert ResponseCache(path).get("k2") == (kept, "run-a")  # a cache of this version is kept as it is


def test_the_end_table_shows_what_the_provider_s_prompt_cache_saved_next_to_what_was_spent() -> None:
    usage = default_prices().priced(
        "claude-haiku-4-5", Usage(input_tokens=3_000_000, cached_tokens=2_000_000, cache_write_tokens=500_000, calls=3)
    )
    result = msgspec.structs.replace(refined(payer="run-a"), usage=usage, usage_by_role={"critic": usage})
    rows = dict(summary_rows(summarize([result], wall_s=1.0), breakdowns=True))
    saved = 2 * (1.0 - 0.10) - 0.5 * (1.25 - 1.0)  # claude-haiku-4-5's reads' discount less its writes' surcharge
    assert rows["saved by the provider's cache"] == (
        f"${saved:,.4f} (2,000,000 input tokens read from it, 500,000 written to it), already out of spent"
    )
    assert rows["spent"] == f"${0.5 * 1.0 + 2 * 0.10 + 0.5 * 1.25:,.4f} paid by this run"
    assert f"${saved:,.4f} saved by the provider's cache" in rows["  critic"]
    plain = dict(summary_rows(summarize([refined(payer="run-a")], wall_s=1.0), breakdowns=False))
    assert "saved by the provider's cache" not in plain  # nothing cached: no row
