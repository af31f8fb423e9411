"""Errors raised inside Ray actors are pickled back to the caller: they must round-trip."""

from __future__ import annotations

import pickle

import pytest

from redraft.errors import BackendError, CheckError, ModelError, RedraftError, ScriptExhaustedError, UserError
from redraft.protocols import ProtocolError


@pytest.mark.parametrize(
    "error",
    [
        UserError("unknown scenario 'x'"),
        ModelError("empty reply"),
        CheckError("faulty check raised KeyError: 'gold'"),
        BackendError("server gone"),
        ProtocolError("invalid message: Expected `int`, got `str` - at `$.round`"),
        ScriptExhaustedError(3),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_round_trip_through_pickle(error: RedraftError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert isinstance(again, RedraftError)


def test_script_exhausted_keeps_its_count() -> None:
    again = pickle.loads(pickle.dumps(ScriptExhaustedError(3)))
    assert again.calls == 3
    assert "after 3 call(s)" in str(again)
