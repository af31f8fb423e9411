"""The run's life as the driver reads it: a checkpoint's replies counted (calls, tokens) and the round its task is
in next, from the real frames; a model host's decode rate and share of a core from its vitals a window apart."""

from __future__ import annotations

import json
from pathlib import Path

from redraft.actors._hosts import STARVED_CORES, WINDOW_S, HostRates
from redraft.actors._live import Live, LiveTally, recorded
from redraft.backends import HostVitals
from redraft.protocols.messages import Decision, Draft, DraftRequest, Task, Usage, encode
from redraft.rundir import RunStore
from redraft.rundir.layout import LIVE


def test_a_landed_round_counts_its_replies_calls_and_tokens_and_says_the_round_its_task_is_in_next() -> None:
    task = Task(task_id="t", scenario="arithmetic", prompt="1 + 1?")
    draft = Draft(task_id="t", round=1, sample=0, text="2", usage=Usage(calls=1, input_tokens=50, output_tokens=7))
    decision = Decision(
        task_id="t", round=1, action="continue", best_round=1, best_sample=0, best_score=0.0, round_best_score=0.0
    )
    request = DraftRequest(task=task, round=1, sample=1, seed=3)
    tally = LiveTally()
    assert tally.landed([encode(task), encode(request), encode(draft), encode(draft), encode(decision)]) == 2
    assert (tally.calls, tally.tokens) == (2, 14)  # the replies' calls and output tokens; a request is no call
    assert tally.landed([encode(task)]) == -1  # nothing of a round: the task's round is left as it was
    live = tally.live([("a", 0), ("b", 2), ("c", 0), ("d", None), ("e", 0)], hosts=[])
    assert live.rounds == {0: 3, 2: 1} and live.grading == 1 and live.in_flight == 5 and live.calls == 2
    assert live.tasks == {"a": 0, "b": 2, "c": 0, "d": None, "e": 0}


def test_the_run_as_it_goes_is_written_beside_its_records_for_watchers_and_removed_at_its_end(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path, {"fingerprint": "f", "identity": {}})
    told: list[Live] = []
    tell = recorded(tmp_path, told.append, every_s=3600.0)
    tally = LiveTally()
    tell(tally.live([("a", 1), ("b", None)], hosts=[]))
    state = json.loads((tmp_path / LIVE).read_text())
    assert state["tasks"] == {"a": 1, "b": None} and state["rounds"] == {"1": 1} and state["grading"] == 1
    tell(tally.live([("c", 0)], hosts=[]))  # within the interval: the hook is told, the file is not rewritten
    assert len(told) == 2 and json.loads((tmp_path / LIVE).read_text())["tasks"] == {"a": 1, "b": None}
    store.close()
    assert not (tmp_path / LIVE).exists()  # nothing is in flight once the run has ended


def vitals(at: float, *, calls: int, tokens: int, busy_s: float, cpu_s: float) -> HostVitals:
    return HostVitals(model="m.gguf", threads=2, calls=calls, tokens=tokens, busy_s=busy_s, cpu_s=cpu_s, at=at)


def test_a_host_s_decode_rate_and_core_share_come_from_its_vitals_a_window_apart() -> None:
    rates = HostRates()
    rates.add({"host-a": vitals(0.0, calls=5, tokens=900, busy_s=20.0, cpu_s=30.0)})  # up before: counts from here
    state = rates.states()[0]
    assert (state.calls, state.tokens, state.tokens_per_s, state.cores) == (0, 0, None, None)  # no window yet
    rates.add({"host-a": vitals(4.0, calls=7, tokens=1_000, busy_s=24.0, cpu_s=37.2)})
    state = rates.states()[0]
    assert (state.calls, state.tokens) == (2, 100)
    assert state.tokens_per_s == 25.0 and abs(state.cores - 1.8) < 1e-9 and not state.starved  # type: ignore[operator]
    # Later a load arrives: over the last window the host got a twentieth of a core.
    for at in (8.0, 12.0, 16.0, 20.0):
        rates.add({"host-a": vitals(at, calls=7, tokens=1_000 + int(at), busy_s=24.0 + at - 4, cpu_s=37.2)})
    rates.add({"host-a": vitals(30.0, calls=8, tokens=1_030, busy_s=50.0, cpu_s=37.2 + 0.05 * (50.0 - 40.0))})
    state = rates.states()[0]
    assert state.cores is not None and state.cores < STARVED_CORES and state.starved
    assert WINDOW_S <= 30.0 - 16.0  # the window: the answer before the last one within WINDOW_S, or older


def test_a_host_that_appears_during_the_run_counts_from_zero() -> None:
    rates = HostRates()
    rates.add({})  # heard: no host yet
    rates.add({"host-b": vitals(0.0, calls=3, tokens=300, busy_s=9.0, cpu_s=15.0)})
    state = rates.states()[0]
    assert (state.calls, state.tokens) == (3, 300)
