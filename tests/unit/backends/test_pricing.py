"""The price table, and costs and budgets as the arbiter accounts them."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import pytest

from redraft.backends.pricing import Price, default_prices, load_prices
from redraft.errors import UserError
from redraft.protocols.convergence import Budget
from redraft.protocols.messages import Draft, Message, Result, Usage
from redraft.scenarios import get_scenario
from tests.support.harness import run_task
from tests.support.replies import LateLearner

TASKS = list(islice(get_scenario("arithmetic").tasks(seed=0), 2))


def test_longest_prefix_wins() -> None:
    table = default_prices()
    assert table.price_of("gpt-4o-mini-2024-07-18") == table.prices["gpt-4o-mini"]
    assert table.price_of("gpt-4o-2024-11-20") == table.prices["gpt-4o"]
    assert table.price_of("claude-sonnet-4-5-20250929") == table.prices["claude-sonnet-4"]
    assert table.price_of("mystery-model") is None


def test_cost_counts_cached_input_at_its_own_price() -> None:
    table = load_prices(None)
    usage = Usage(input_tokens=1_000_000, cached_tokens=400_000, output_tokens=100_000, calls=1)
    # gpt-4o-mini: 0.15 input, 0.075 cached input, 0.60 output per million
    assert table.cost("gpt-4o-mini", usage) == pytest.approx(0.6 * 0.15 + 0.4 * 0.075 + 0.1 * 0.60)


def test_anthropic_cache_writes_cost_their_own_price_and_the_saving_nets_them_against_the_reads() -> None:
    table = load_prices(None)
    # claude-haiku-4-5: 1.0 input, 0.10 read, 1.25 write, 5.0 output per million
    usage = Usage(input_tokens=1_000_000, cached_tokens=500_000, cache_write_tokens=200_000, calls=2)
    assert table.cost("claude-haiku-4-5", usage) == pytest.approx(0.3 * 1.0 + 0.5 * 0.10 + 0.2 * 1.25)
    priced = table.priced("claude-haiku-4-5-20251001", usage)
    assert priced.prompt_cache_saved_usd == pytest.approx(0.5 * (1.0 - 0.10) - 0.2 * (1.25 - 1.0))
    assert priced.cost_usd + priced.prompt_cache_saved_usd == pytest.approx(1.0)  # what no cache would have cost
    only_written = table.priced("claude-haiku-4-5", Usage(input_tokens=1_000_000, cache_write_tokens=1_000_000))
    assert only_written.prompt_cache_saved_usd == pytest.approx(-0.25)  # a write never read back only costs
    batched = table.priced("gpt-4o-mini", Usage(input_tokens=10**6, cached_tokens=10**6, calls=1, batch_calls=1))
    assert batched.prompt_cache_saved_usd == pytest.approx(0.5 * (0.15 - 0.075))  # at the batch price
    assert table.priced("local:model.gguf", usage).prompt_cache_saved_usd == 0.0


def test_local_and_scripted_models_are_free_and_unknown_ones_unpriced() -> None:
    table = default_prices()
    usage = Usage(input_tokens=100, output_tokens=100, calls=1)
    assert table.cost("SmolLM2-135M-Instruct.Q4_1.gguf", usage) == 0.0
    assert table.cost("scripted:always_seven", usage) == 0.0
    assert table.cost("mystery-model", usage) is None


def test_user_file_adds_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps({"gpt-4o-mini": {"input": 1.0, "output": 2.0}, "house-model": {"input": 3, "output": 4}})
    )
    table = load_prices(path)
    assert table.prices["gpt-4o-mini"] == Price(input=1.0, output=2.0)
    assert table.price_of("house-model-v2") == Price(input=3, output=4)
    assert table.cost("house-model", Usage(input_tokens=10, cached_tokens=5, output_tokens=0)) == pytest.approx(3e-5)


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "price file not found"), ("{not json", "bad price file"), ('{"m": {"input": "cheap"}}', "bad price file")],
)
def test_bad_price_file_is_a_user_error(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "prices.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_prices(path)


def refine(model: str, **convergence: object) -> list[Message]:
    return run_task(TASKS[0], LateLearner(fix_at=2), model=model, **convergence)


def test_arbiter_prices_every_call_and_splits_usage_by_role() -> None:
    trace = refine("gpt-4o-mini-2024-07-18", max_rounds=5, patience=5)
    result = trace[-1]
    assert isinstance(result, Result)
    table = default_prices()
    drafts = [m for m in trace if isinstance(m, Draft)]
    expected_drafter = sum(table.cost(d.model, d.usage) or 0 for d in drafts)
    assert result.usage_by_role["drafter"].calls == len(drafts) == 6
    assert result.usage_by_role["drafter"].cost_usd == pytest.approx(expected_drafter)
    assert result.usage_by_role["critic"].calls == 4
    assert result.usage.cost_usd == pytest.approx(sum(u.cost_usd for u in result.usage_by_role.values()))
    assert result.usage.cost_usd > 0 and result.unpriced_models == []


def test_unpriced_models_are_named_not_guessed() -> None:
    result = refine("house-model", max_rounds=2)[-1]
    assert isinstance(result, Result)
    assert result.unpriced_models == ["house-model"] and result.usage.cost_usd == 0.0


def test_task_usd_budget_stops_through_the_convergence_protocol() -> None:
    one_round = refine("gpt-4o-mini", max_rounds=1)[-1]
    assert isinstance(one_round, Result)
    budget = Budget(max_usd=one_round.usage.cost_usd * 1.5)  # less than two rounds of drafts and critiques
    result = refine("gpt-4o-mini", max_rounds=5, patience=5, budget=budget)[-1]
    assert isinstance(result, Result)
    assert result.stop_reason == "budget" and result.rounds == 1
