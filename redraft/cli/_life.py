"""The words that show a run alive before its tasks finish: time elapsed, calls and tokens made so far, the
model's decode rate, the tasks in flight by round, an ETA from calls, and a model host starved of CPU.

Calls and tokens so far are the larger of two accounts: the rounds that landed (every backend; a round lands
whole) and the embedded model's hosts (a call counted as it ends, a token as it is made), so a run whose first
round takes minutes moves from its first call. The ETA from calls needs the calls the run is expected to make
(its estimate's expected course); it is said as soon as one call has ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the actor system is loaded by the command that runs, not by `redraft --help`
    from redraft.actors import HostState, Live


def elapsed(seconds: float) -> str:
    """``12m05s``, ``1h02m``, ``45s``: a duration, at a glance."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def made(live: Live) -> tuple[int, int]:
    """Calls and tokens made so far: the larger of the rounds' account and the model hosts'."""
    calls = max(live.calls, sum(h.calls for h in live.hosts))
    tokens = max(live.tokens, sum(h.tokens for h in live.hosts))
    return calls, tokens


def calls_eta(live: Live, elapsed_s: float, expected_calls: int | None) -> float | None:
    """Seconds left at the calls' rate so far, towards the calls expected; None before the first call ends, with
    no expectation, or past it."""
    calls, _ = made(live)
    if not expected_calls or not calls or calls >= expected_calls or elapsed_s <= 0:
        return None
    return (expected_calls - calls) / (calls / elapsed_s)


def life_text(live: Live, elapsed_s: float, expected_calls: int | None) -> str:
    """``2m10s, 37 calls and 5,120 tokens so far, model 41 tokens/s, in flight: 6 in round 1, 4 in round 2,
    ETA 3m20s from calls`` (and a starved host's line after a ``;``)."""
    calls, tokens = made(live)
    parts = [f"{elapsed(elapsed_s)}, {calls:,} call{_s(calls)} and {tokens:,} token{_s(tokens)} so far"]
    rates = [h.tokens_per_s for h in live.hosts if h.tokens_per_s is not None]
    if rates:
        parts.append(f"model {sum(rates):,.0f} tokens/s")
    if in_flight := rounds_text(live):
        parts.append(f"in flight: {in_flight}")
    if (eta := calls_eta(live, elapsed_s, expected_calls)) is not None:
        parts.append(f"ETA {elapsed(eta)} from calls")
    starved = starved_text(live.hosts)
    return ", ".join(parts) + (f"; {starved}" if starved else "")


def rounds_text(live: Live) -> str:
    """``6 in round 1, 4 in round 2, 1 grading`` (rounds counted from 1, as people count them)."""
    said = [f"{count} in round {number + 1}" for number, count in live.rounds.items() if count]
    if live.grading:
        said.append(f"{live.grading} grading")
    return ", ".join(said)


def starved_text(hosts: list[HostState]) -> str:
    """``the model is getting 5 % of a core: other work on this machine`` when a host is starved, ``the model
    decodes with 1 of 2 threads: other work on this machine`` when one gave up threads to it, else ''."""
    starved = [h.cores for h in hosts if h.starved and h.cores is not None]
    if starved:
        return f"the model is getting {min(starved) * 100:.0f} % of a core: other work on this machine"
    crowded = [h for h in hosts if h.crowded]
    if crowded:
        host = min(crowded, key=lambda h: h.threads)
        return f"the model decodes with {host.threads} of {host.most_threads} threads: other work on this machine"
    return ""


def _s(count: int) -> str:
    return "" if count == 1 else "s"
