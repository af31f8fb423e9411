"""Whether a command's runs share a fleet: ``REDRAFT_FLEET`` (shared unless it says ``per-run``), read once per
command; an unknown mode is refused in one line before anything starts."""

from __future__ import annotations

import pytest

from redraft.actors._leases import Fleets
from redraft.errors import UserError


def test_an_unknown_fleet_mode_is_refused_in_one_line_naming_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDRAFT_FLEET", "pooled")
    with pytest.raises(UserError, match=r"^REDRAFT_FLEET='pooled' is not a fleet mode; known: shared, per-run$"):
        Fleets()


def test_runs_share_a_fleet_unless_told_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDRAFT_FLEET", "per-run")
    assert not Fleets().shared and Fleets(shared=True).shared  # Ray is not asked: a fleet starts with a run
    monkeypatch.delenv("REDRAFT_FLEET")
    assert Fleets().shared


def test_a_negative_idle_time_is_refused_in_one_line() -> None:
    with pytest.raises(UserError, match=r"^a fleet's idle time must be 0 s or more, not -1$"):
        Fleets(shared=True, idle_s=-1)
    assert Fleets(shared=True, idle_s=0).idle_s == 0 and Fleets(shared=True).idle_s is None  # no timer unless given
