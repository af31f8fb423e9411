"""Whose fault a failure is: the task's (recorded as its result) or the machinery's (the task is redone).

The machinery's failures are Ray's own (an actor, worker or node died, an object
was lost), a call that passed its deadline, and a backend that failed every
attempt of a call (`BackendUnavailableError`). Each is turned into one
`InfrastructureError` carrying the typed cause, which the arbiter lets out of a
task's loop and the driver reads to requeue the task. Everything else (a check
that raised, a model that answered nothing, a request the server refused) stays
the task's own failure.
"""

from __future__ import annotations

from redraft.errors import BackendUnavailableError, CallTimeoutError, InfrastructureError, cause_of, describe
from redraft.runtime import is_ray_system_error


def infrastructure_failure(exc: BaseException, *, role: str | None = None) -> InfrastructureError | None:
    """``exc`` as the machinery's failure (``role``: whose call failed), or None when it is the task's own."""
    cause = cause_of(exc)
    if isinstance(cause, InfrastructureError):
        return cause
    if isinstance(cause, BackendUnavailableError):
        return InfrastructureError(describe(cause), cause=type(cause).__name__, role=role, endpoint=cause.endpoint)
    if isinstance(cause, CallTimeoutError) or is_ray_system_error(cause) or is_ray_system_error(exc):
        return InfrastructureError(describe(cause), cause=type(cause).__name__, role=role)
    return None


def member_failure(exc: BaseException) -> bool:
    """Whether a call failed because of the member that served it (dead, gone, hung): another member may answer.

    A backend that is down is not such a failure: every member calls the same server.
    """
    cause = cause_of(exc)
    return isinstance(cause, CallTimeoutError) or is_ray_system_error(cause) or is_ray_system_error(exc)
