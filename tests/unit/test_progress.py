"""The progress line's account of the endpoints: only those that adapt or were throttled, each with its calls in
flight of what its limiter allows now, and the plain line (logs, CI) carries the same words."""

from __future__ import annotations

import pytest

from redraft.actors._endpoints import EndpointState
from redraft.cli._progress import RunProgress, endpoints_text
from redraft.protocols.messages import Result, Usage


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
        progress.in_flight(8)
        assert capsys.readouterr().err == ""  # not yet: a heartbeat every 30 s
        now[0] += 11.0 * 60 + 15.0
        progress.in_flight(7)
        beat = capsys.readouterr().err.strip()
        assert beat == "refining: 0/8 tasks done, 7 in flight, 0 model calls by the tasks done, 11m35s elapsed"
        progress.in_flight(7)
        assert capsys.readouterr().err == ""  # once per 30 s


def test_a_finished_run_resumed_starts_nothing_and_says_so_only(capsys: pytest.CaptureFixture[str]) -> None:
    progress = RunProgress()
    with progress:
        progress.start(total=3, already_done=3)
    assert [line for line in capsys.readouterr().err.splitlines() if line] == ["resuming: 3 of 3 tasks already done"]
