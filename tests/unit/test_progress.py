"""The progress line's account of the endpoints: only those that adapt or were throttled, each with its calls in
flight of what its limiter allows now, and the plain line (logs, CI) carries the same words."""

from __future__ import annotations

from typing import Any

import pytest

from redraft.actors import HostState, Live
from redraft.actors._endpoints import EndpointState
from redraft.cli._progress import RunProgress, endpoints_text
from redraft.protocols.messages import Result, Usage


def live(rounds: dict[int, int], calls: int = 0, tokens: int = 0, hosts: list[HostState] | None = None) -> Live:
    return Live(rounds=rounds, grading=0, calls=calls, tokens=tokens, hosts=hosts or [])


def state(endpoint: str, in_flight: int, window: float | None, throttled: int) -> EndpointState:
    return EndpointState(endpoint=endpoint, in_flight=in_flight, window=window, throttled=throttled)


def test_the_endpoints_shown_are_those_that_adapt_or_were_throttled() -> None:
    states = [
        state("openai:gpt-4o-mini", 12, 16.7, 3),
        state("anthropic:claude-haiku-4-5", 2, None, 0),  # a fixed limit, never throttled: nothing to say
        state("openai-compatible:m@http://127.0.0.1:8000/v1", 4, None, 1),  # fixed, but throttled
    ]
    assert endpoints_text(states) == (
        "openai:gpt-4o-mini 12/16 in flight, 3 throttled; openai-compatible:m@http://127.0.0.1:8000/v1 4 in flight, "
        "1 throttled"
    )
    assert endpoints_text([state("openai:gpt-4o-mini", 0, 8.0, 0)]) == "openai:gpt-4o-mini 0/8 in flight"
    assert endpoints_text([]) == ""


def test_the_plain_progress_line_names_the_throttled_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    progress = RunProgress()
    progress._plain = True  # as when stderr is not a terminal
    with progress:
        progress.start(total=2, already_done=0)
        progress.endpoints([state("openai:gpt-4o-mini", 5, 6.0, 2)])
        for task_id in ("t0", "t1"):
            progress.advance(
                Result(
                    task_id=task_id, scenario="arithmetic", answer="1", text="Answer: 1", score=1.0, passed=True,
                    initial_score=1.0, initial_passed=True, rounds=1, stop_reason="threshold", usage=Usage(calls=1),
                    wall_s=0.1,
                )
            )  # fmt: skip
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("refining: 2/2 tasks, feedback pass 100%")
    assert line.endswith("openai:gpt-4o-mini 5/6 in flight, 2 throttled")


def test_the_progress_line_names_each_pass_rate_by_its_basis(capsys: pytest.CaptureFixture[str]) -> None:
    """Before, "pass 100%" was the feedback's rate under a table that opens with the graded one."""
    progress = RunProgress()
    progress._plain = True
    with progress:
        progress.start(total=2, already_done=0)
        for task_id, graded in (("t0", True), ("t1", False)):
            progress.advance(
                Result(
                    task_id=task_id, scenario="arithmetic", answer="1", text="Answer: 1", score=1.0, passed=True,
                    initial_score=1.0, initial_passed=True, rounds=1, stop_reason="threshold", usage=Usage(calls=1),
                    wall_s=0.1, grade=float(graded), graded_pass=graded,
                )
            )  # fmt: skip
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("refining: 2/2 tasks, graded pass 50%, feedback pass 100%, ")
    assert progress.rates() == "graded pass 50%, feedback pass 100%"


def test_a_run_that_finishes_nothing_for_a_while_still_says_it_is_alive(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, output that was not a terminal printed nothing for 41 minutes while no task finished."""
    import redraft.cli._progress as module

    now = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    progress = RunProgress("starting Ray and the run's actors; the model loads on each node with its first call")
    progress._plain = True
    with progress:
        progress.start(total=10, already_done=2)
        said = capsys.readouterr().err.splitlines()
        assert said == [
            "resuming: 2 of 10 tasks already done",
            "redraft: starting Ray and the run's actors; the model loads on each node with its first call",
        ]
        now[0] += 20.0
        progress.live(live({0: 8}))
        assert capsys.readouterr().err == ""  # not yet: a heartbeat every 30 s
        now[0] += 11.0 * 60 + 15.0
        progress.live(live({0: 7}))
        beat = capsys.readouterr().err.strip()
        assert beat == "refining: 0/8 tasks done, 11m35s, 0 calls and 0 tokens so far, in flight: 7 in round 1"
        progress.live(live({0: 7}))
        assert capsys.readouterr().err == ""  # once per 30 s


def test_a_finished_run_resumed_starts_nothing_and_says_so_only(capsys: pytest.CaptureFixture[str]) -> None:
    progress = RunProgress()
    with progress:
        progress.start(total=3, already_done=3)
    assert [line for line in capsys.readouterr().err.splitlines() if line] == ["resuming: 3 of 3 tasks already done"]


def host(calls: int, tokens: int, tokens_per_s: float | None, cores: float | None) -> HostState:
    return HostState(model="m.gguf", calls=calls, tokens=tokens, tokens_per_s=tokens_per_s, cores=cores)


def test_the_heartbeat_shows_calls_tokens_decode_rate_rounds_and_an_eta_from_calls_before_any_task_ends(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, it read "0 model calls by the tasks done" for 14 minutes while the model worked."""
    import redraft.cli._progress as module

    now = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    progress = RunProgress()
    progress._plain = True
    with progress:
        progress.start(total=10, already_done=0)
        progress.expect(estimate_of(calls=120))
        now[0] += 100.0
        # The rounds landed say 6 calls; the model host has finished 30 and made 4,100 tokens: the larger counts.
        progress.live(Live(rounds={0: 6, 1: 3}, grading=1, calls=6, tokens=500, hosts=[host(30, 4_100, 41.4, 1.7)]))
    beat = capsys.readouterr().err.strip().splitlines()[-1]
    assert beat == (
        "refining: 0/10 tasks done, 1m40s, 30 calls and 4,100 tokens so far, model 41 tokens/s, "
        "in flight: 6 in round 1, 3 in round 2, 1 grading, ETA 5m00s from calls"
    )  # 90 calls left at 0.3 calls/s


def test_a_starved_model_host_is_named_as_such(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import redraft.cli._progress as module

    now = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    progress = RunProgress()
    progress._plain = True
    with progress:
        progress.start(total=2, already_done=0)
        now[0] += 40.0
        progress.live(live({0: 2}, hosts=[host(1, 90, 2.5, 0.05)]))
        now[0] += 40.0
        progress.live(live({0: 2}, hosts=[host(1, 90, 30.0, 0.9)]))  # the load went away
    first, second = capsys.readouterr().err.strip().splitlines()[-2:]
    assert first.endswith("; the model is getting 5 % of a core: other work on this machine")
    assert "of a core" not in second and "model 30 tokens/s" in second


def test_a_host_that_gave_up_threads_to_other_work_says_so() -> None:
    """Not starved (it has its one core), but decoding with fewer threads than on a quiet machine."""
    from dataclasses import replace

    from redraft.cli._life import starved_text

    quiet = replace(host(3, 300, 40.0, 1.9), threads=2, most_threads=2)
    crowded = replace(host(3, 300, 14.0, 0.5), threads=1, most_threads=2)
    assert starved_text([quiet]) == ""
    assert starved_text([quiet, crowded]) == "the model decodes with 1 of 2 threads: other work on this machine"
    starved = replace(host(3, 300, 1.0, 0.05), threads=1, most_threads=2)
    assert starved_text([crowded, starved]).startswith("the model is getting 5 % of a core")


def test_the_terminal_bar_carries_the_same_life_and_the_eta_from_calls() -> None:
    from rich.console import Console

    progress = RunProgress()
    progress._plain = True  # the bar's columns rendered here, not started on the test's stderr
    console = Console(record=True, width=300)
    with progress:
        progress.start(total=4, already_done=0)
        progress.expect(estimate_of(calls=40))
        progress.live(live({1: 4}, calls=8, tokens=640))
        console.print(progress._bar.make_tasks_table(progress._bar.tasks))
    shown = console.export_text()
    assert "0/4" in shown and "8 calls and 640 tokens so far" in shown and "in flight: 4 in round 2" in shown
    assert "from calls" in shown and "-:--:--" not in shown  # the ETA column is the calls', not blank


def estimate_of(calls: int) -> Any:
    from redraft.engine.estimate import Estimate, Spend

    return Estimate(
        tasks=1, simulated=1, first_pass=Spend(), expected=Spend({"drafter": Usage(calls=calls)}), worst=Spend(),
        models={},
    )  # fmt: skip
