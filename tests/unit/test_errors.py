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


# ---------------------------------------------------------------- whose fault: the one table


def test_the_machinery_table_names_ray_s_own_errors_and_every_subclass_of_them() -> None:
    import inspect

    import ray.exceptions as rex

    from redraft.errors import MACHINERY, recorded_as_machinery

    named = MACHINERY["ray.exceptions"]
    for name in named:
        assert inspect.isclass(getattr(rex, name, None)), f"ray.exceptions has no {name}"
    roots = [getattr(rex, name) for name in named]
    for _, cls in inspect.getmembers(rex, inspect.isclass):
        if any(issubclass(cls, root) for root in roots):
            assert cls.__name__ in named, f"{cls.__name__} is a machinery error the table does not name"
            assert recorded_as_machinery(cls.__name__)  # a record naming it is redone on resume
    assert not recorded_as_machinery("CheckError") and not recorded_as_machinery(None)
    assert not recorded_as_machinery("RetryableBackendError")  # not in the table: retries end as BackendUnavailable


def test_whose_fault_is_decided_by_the_class_and_how_it_failed() -> None:
    import ray.exceptions as rex

    from redraft.errors import (
        BackendUnavailableError,
        CallTimeoutError,
        InfrastructureError,
        machinery_failure,
        member_failure,
    )

    died = machinery_failure(rex.ActorDiedError(), role="drafter")
    assert died is not None and (died.cause, died.fault, died.role) == ("ActorDiedError", "died", "drafter")
    hung = machinery_failure(CallTimeoutError("past its deadline"))
    assert hung is not None and hung.fault == "hung"
    down = machinery_failure(BackendUnavailableError("HTTP 503 on every attempt", endpoint="openai:m"))
    assert down is not None and (down.fault, down.endpoint) == ("unreachable", "openai:m")
    assert member_failure(rex.ActorDiedError()) and member_failure(CallTimeoutError("x"))
    assert not member_failure(BackendUnavailableError("x", endpoint="e"))  # every member calls that server
    for own in (ValueError("the check is broken"), CheckError("x"), ModelError("empty"), UserError("bad")):
        assert machinery_failure(own) is None and not member_failure(own)
    raised = InfrastructureError("the arbiter's stream ended early", cause="StreamEndedError")
    assert machinery_failure(raised) is raised  # the machinery's own word is kept as it is


def test_ray_s_wrapper_of_a_task_error_is_looked_through() -> None:
    import ray.exceptions as rex

    from redraft.errors import machinery_failure

    wrapped = rex.RayTaskError("serve_many", "traceback", CheckError("a check raised")).as_instanceof_cause()
    assert machinery_failure(wrapped) is None  # the check's failure, behind Ray's wrapper: the task's own
    lost = rex.RayTaskError("serve_many", "traceback", rex.ActorDiedError()).as_instanceof_cause()
    found = machinery_failure(lost)
    assert found is not None and found.cause == "ActorDiedError"


def test_an_infrastructure_error_keeps_how_it_failed_through_pickle() -> None:
    from redraft.errors import InfrastructureError

    error = InfrastructureError("hung", cause="CallTimeoutError", fault="hung", role="critic", endpoint=None)
    again = pickle.loads(pickle.dumps(error))
    assert (again.cause, again.fault, again.role, str(again)) == ("CallTimeoutError", "hung", "critic", "hung")
