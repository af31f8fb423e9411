"""The convergence protocol: every stop reason, their precedence, rollback, best-so-far."""

from __future__ import annotations

import msgspec
import pytest

from redraft.protocols.convergence import (
    Budget,
    Candidate,
    ConvergenceConfig,
    ConvergenceProtocol,
    text_delta,
)
from redraft.protocols.messages import Usage


def cand(round_: int, score: float, text: str | None = None, sample: int = 0) -> Candidate:
    return Candidate(round=round_, sample=sample, text=text or f"distinct answer number {round_} " * 3, score=score)


def feed(protocol: ConvergenceProtocol, *leaders: Candidate, calls_per_round: int = 1):  # type: ignore[no-untyped-def]
    verdicts = []
    for i, leader in enumerate(leaders):
        spent = Usage(input_tokens=100 * (i + 1), output_tokens=10 * (i + 1), calls=calls_per_round * (i + 1))
        verdicts.append(protocol.observe(leader, spent=spent, elapsed_s=float(i + 1)))
    return verdicts


def test_continues_while_nothing_holds() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=5, patience=3))
    [v] = feed(p, cand(0, 0.2))
    assert v.action == "continue" and v.reason is None
    assert v.best == cand(0, 0.2)


def test_threshold() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(threshold=0.8, max_rounds=5))
    v0, v1 = feed(p, cand(0, 0.5), cand(1, 0.8))
    assert v0.action == "continue"
    assert (v1.action, v1.reason) == ("stop", "threshold")
    assert v1.best is not None and v1.best.round == 1


def test_max_rounds_counts_the_first_draft() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=2, patience=5))
    v0, v1 = feed(p, cand(0, 0.1), cand(1, 0.2))
    assert v0.action == "continue"
    assert (v1.action, v1.reason) == ("stop", "max_rounds")


def test_single_round_stops_at_once() -> None:
    [v] = feed(ConvergenceProtocol(ConvergenceConfig(max_rounds=1)), cand(0, 0.0))
    assert v.reason == "max_rounds"


def test_no_improvement_after_patience_rounds() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, patience=2))
    verdicts = feed(p, cand(0, 0.5), cand(1, 0.5), cand(2, 0.4))
    assert [v.action for v in verdicts] == ["continue", "continue", "stop"]
    assert verdicts[-1].reason == "no_improvement"


def test_improvement_resets_patience() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, patience=2))
    verdicts = feed(p, cand(0, 0.5), cand(1, 0.5), cand(2, 0.6), cand(3, 0.6))
    assert all(v.action == "continue" for v in verdicts)


def test_stable_when_the_leader_repeats_an_earlier_one() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, patience=5))
    v0, v1, v2 = feed(p, cand(0, 0.3, "Answer: 8"), cand(1, 0.2, "x = 9; Answer: 9"), cand(2, 0.3, "Answer:  8"))
    assert (v0.action, v1.action) == ("continue", "continue")
    assert (v2.action, v2.reason) == ("stop", "stable")
    assert "round 0" in v2.detail


def test_without_heuristics_only_the_hard_rules_stop_a_task() -> None:
    """A strategy that stops itself: repeats and stale rounds go on; the threshold, budget and cycle limit hold."""
    config = ConvergenceConfig(max_rounds=5, patience=1, heuristics=False)
    repeats = [cand(0, 0.3, "Answer: 8"), cand(1, 0.3, "Answer: 8"), cand(2, 0.2, "Answer: 8"), cand(3, 0.3)]
    verdicts = feed(ConvergenceProtocol(config), *repeats, cand(4, 0.3))
    assert [v.reason for v in verdicts] == [None, None, None, None, "max_rounds"]
    [_, done] = feed(ConvergenceProtocol(config), cand(0, 0.3, "Answer: 8"), cand(1, 1.0, "Answer: 8"))
    assert done.reason == "threshold"
    spent = ConvergenceProtocol(msgspec.structs.replace(config, budget=Budget(max_calls=2)))
    assert [v.reason for v in feed(spent, cand(0, 0.3, "A"), cand(1, 0.3, "A"))] == [None, "budget"]
    with_them = feed(ConvergenceProtocol(ConvergenceConfig(max_rounds=5, patience=1)), *repeats[:2])
    assert with_them[-1].reason == "stable"  # the same leaders stop a task when the heuristics are on


def test_stable_uses_epsilon_on_the_text_delta() -> None:
    long = "step one adds three and four to make seven. " * 10
    nearly = long.replace("seven", "Seven", 1)
    assert 0 < text_delta(long, nearly) < 0.02
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, patience=5, stable_epsilon=0.02))
    assert feed(p, cand(0, 0.1, long), cand(1, 0.1, nearly))[-1].reason == "stable"
    strict = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, patience=5, stable_epsilon=0.001))
    assert feed(strict, cand(0, 0.1, long), cand(1, 0.1, nearly))[-1].action == "continue"


def test_budget_tokens_spent() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, budget=Budget(max_tokens=200)))
    v = p.observe(cand(0, 0.1), spent=Usage(input_tokens=150, output_tokens=60, calls=1), elapsed_s=1)
    assert (v.action, v.reason, v.limit) == ("stop", "budget", "tokens")
    assert "tokens budget spent" in v.detail


def test_budget_stops_before_a_round_that_would_overrun() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, budget=Budget(max_calls=5)))
    v0 = p.observe(cand(0, 0.1), spent=Usage(calls=2), elapsed_s=1)
    v1 = p.observe(cand(1, 0.2), spent=Usage(calls=4), elapsed_s=2)
    assert v0.action == "continue"  # 2 used, a round costs 2: 4 <= 5
    assert (v1.action, v1.reason, v1.limit) == ("stop", "budget", "calls")  # 4 used + 2 > 5
    assert "another round needs ~2" in v1.detail


def test_budget_seconds() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, budget=Budget(max_seconds=3.0)))
    verdict = p.observe(cand(0, 0.1), spent=Usage(), elapsed_s=3.5)
    assert (verdict.reason, verdict.limit) == ("budget", "task_timeout")


def test_only_a_budget_stop_names_a_limit() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=2, budget=Budget(max_usd=1.0)))
    verdicts = feed(p, cand(0, 0.1), cand(1, 0.2))
    assert [(v.reason, v.limit) for v in verdicts] == [(None, None), ("max_rounds", None)]


def test_error_keeps_the_best_so_far() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=5))
    feed(p, cand(0, 0.4))
    v = p.fail("BackendError: server gone")
    assert (v.action, v.reason, v.detail) == ("stop", "error", "BackendError: server gone")
    assert v.best == cand(0, 0.4)


def test_error_before_any_round_has_no_best() -> None:
    v = ConvergenceProtocol(ConvergenceConfig()).fail("boom")
    assert v.reason == "error" and v.best is None


def test_rollback_keeps_the_better_earlier_candidate() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=5, patience=5))
    v0, v1, v2 = feed(p, cand(0, 0.6), cand(1, 0.3), cand(2, 0.7))
    assert not v0.rolled_back
    assert v1.rolled_back and v1.best == cand(0, 0.6)
    assert not v2.rolled_back and v2.best == cand(2, 0.7)


def test_stop_returns_the_best_not_the_last() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=3, patience=5))
    verdicts = feed(p, cand(0, 0.2), cand(1, 0.9), cand(2, 0.1))
    assert verdicts[-1].reason == "max_rounds"
    assert verdicts[-1].best == cand(1, 0.9)


def test_a_tie_does_not_replace_the_best() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=5, patience=5))
    v = feed(p, cand(0, 0.5), cand(1, 0.5))[-1]
    assert v.best == cand(0, 0.5) and not v.rolled_back


# --- precedence: threshold > budget > max_rounds > stable > no_improvement (error preempts all)


def test_threshold_beats_budget_and_max_rounds() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=1, budget=Budget(max_calls=1)))
    assert p.observe(cand(0, 1.0), spent=Usage(calls=5), elapsed_s=1).reason == "threshold"


def test_budget_beats_max_rounds() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=1, budget=Budget(max_calls=1)))
    assert p.observe(cand(0, 0.1), spent=Usage(calls=5), elapsed_s=1).reason == "budget"


def test_max_rounds_beats_stable() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=2, patience=5))
    assert feed(p, cand(0, 0.1, "same"), cand(1, 0.1, "same"))[-1].reason == "max_rounds"


def test_stable_beats_no_improvement() -> None:
    p = ConvergenceProtocol(ConvergenceConfig(max_rounds=10, patience=1))
    assert feed(p, cand(0, 0.1, "same"), cand(1, 0.1, "same"))[-1].reason == "stable"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": 1.5}, "threshold"),
        ({"max_rounds": 0}, "max_rounds"),
        ({"patience": 0}, "patience"),
        ({"stable_epsilon": 1.0}, "stable_epsilon"),
    ],
)
def test_bad_config_is_rejected(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ConvergenceConfig(**kwargs)  # type: ignore[arg-type]


def test_a_leader_unchanged_by_refused_edits_is_not_stable() -> None:
    protocol = ConvergenceProtocol(ConvergenceConfig(max_rounds=5, patience=3))
    protocol.observe(cand(0, 0.0, "the same text"), spent=Usage(), elapsed_s=0.0)
    refused = protocol.observe(cand(1, 0.0, "the same text"), spent=Usage(), elapsed_s=0.0, refused=True)
    assert (refused.action, refused.reason) == ("continue", None)
    repeat = protocol.observe(cand(2, 0.0, "the same text"), spent=Usage(), elapsed_s=0.0)
    assert (repeat.action, repeat.reason) == ("stop", "stable")  # a real repeat still stops
