"""One exception hierarchy for redraft, each class naming whose mistake it is.

The classes: `UserError`, `ModelError`, `CheckError`, `BackendError`, `ProtocolError`, `SandboxError`,
`InfrastructureError`, `RunDirWriteError`, `ClusterError`; each says whose mistake it is in its docstring.

Whose fault an exception is, the task's (recorded as its result) or the machinery's
(the task is redone), is decided by one table, `MACHINERY`, which every place that
decides asks (`machinery_failure`, `member_failure`, `recorded_as_machinery`).

Errors raised inside Ray actors are pickled back to the caller, so every class
with extra constructor arguments defines `__reduce__`.

A name that is none of the known ones (a scenario, a strategy, a backend prefix, a
setting, an export format...) is refused in one shape, made by `unknown_name`:
``unknown strategy 'self-refine' (did you mean 'self_refine'? known: ...)``.

See docs/architecture.md, section "Errors: whose mistake each is".
"""

from __future__ import annotations

import difflib
import os
import traceback
from collections.abc import Iterable, Sequence
from typing import Literal

from redraft.plaintext import plain_text


class RedraftError(Exception):
    """Base of every error redraft raises on purpose."""


class UserError(RedraftError):
    """The caller's input or configuration is invalid; fix the input and rerun."""


class RunDirVersionError(UserError):
    """A run directory written at a wire version this one does not read (the code before 0.1.0): never read or
    resumed, refused in one line before anything else is done with it."""


class JudgementError(UserError, ValueError):
    """A person's judgement (a label, a preference) that cannot be recorded as given: an empty reviewer, a
    comment too long, a verdict that is none of the known ones. Also a `ValueError`, for callers that check
    values the plain way."""


class RunDirWriteError(RedraftError):
    """A directory redraft writes stopped taking writes (the disk is full, the filesystem read-only, a quota
    met): what was recorded stays, and a rerun with the same settings resumes once it takes writes again.
    The CLI prints it as one line, exit 1."""


class RedraftWarning(UserWarning):
    """The run goes on, but less well than it could, for a reason the caller can fix (said once per process)."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"did you mean 'x'? "`` for the known name most like ``name``, or "" when none is near.

    Near is difflib's ratio of at least 0.6: a typo, a dash for an underscore, a letter
    too many. ``known`` is read once, so a stream of names (a run's task ids) is fine.
    """
    close = difflib.get_close_matches(name, known, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def unknown_name(kind: str, name: str, known: Sequence[str], *, like: Iterable[str] | None = None) -> UserError:
    """The error for a ``kind`` called ``name`` that is none of ``known``: the nearest suggested, then all.

    ``like`` are the names to suggest from when they are not ``known`` as listed (a
    parametrized family listed as ``reasoning_gym:NAME`` suggests ``reasoning_gym:leg_counting``).
    """
    near = did_you_mean(name, known if like is None else like)
    return UserError(f"unknown {kind} {name!r} ({near}known: {', '.join(known)})")


class ModelError(RedraftError):
    """A model returned something unusable; the step that needed it fails."""


class CheckError(RedraftError):
    """A scenario's check raised instead of judging the candidate: a bug in the check, not evidence.

    It ends the task with stop reason ``error`` (cause ``CheckError``); a score of 0
    would blame the candidate for the check's fault, and its message fed back as
    feedback would mislead the drafter. ``raised`` is the class of what the check
    raised, ``where`` the innermost frame (``file.py:12 in fn``, the file's base name
    only), ``trace`` the traceback with base names only: no machine path is kept.
    """

    def __init__(self, message: str, *, raised: str = "", where: str = "", trace: str = "") -> None:
        super().__init__(message)
        self.raised = raised
        self.where = where
        self.trace = trace

    @classmethod
    def of(cls, check: str, exc: BaseException) -> CheckError:
        """The error for ``check`` (a name people recognise: the scenario, the user's MODULE:FUNCTION) raising
        ``exc``."""
        frames = traceback.extract_tb(exc.__traceback__)
        where = _frame_name(frames[-1]) if frames else ""
        lines = [f"  {_frame_name(f)}\n    {(f.line or '').strip()}" for f in frames]
        trace = "\n".join(["Traceback (most recent call last):", *lines, *traceback.format_exception_only(exc)])
        message = plain_text(f"{check} raised {type(exc).__name__}: {exc}")  # what it raised may quote a candidate
        return cls(message, raised=type(exc).__name__, where=plain_text(where), trace=plain_text(trace))

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_check_error, (str(self), self.raised, self.where, self.trace))


def _rebuild_check_error(message: str, raised: str, where: str, trace: str) -> CheckError:
    return CheckError(message, raised=raised, where=where, trace=trace)


def _frame_name(frame: traceback.FrameSummary) -> str:
    return f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"


class CheckBrokenError(RedraftError):
    """The check raised on every candidate of the run's first tasks: the run stops before more is paid."""


class BackendError(RedraftError):
    """Talking to a model backend failed (transport, server, runtime)."""


class ContextTooLong(BackendError):
    """A prompt has more tokens than the model's context holds: the same prompt will never fit."""


class ScriptExhaustedError(BackendError):
    """A scripted backend was asked for more replies than it was given."""

    def __init__(self, calls: int) -> None:
        super().__init__(f"scripted backend ran out of replies after {calls} call(s)")
        self.calls = calls

    def __reduce__(self) -> tuple[type[ScriptExhaustedError], tuple[int]]:
        return (ScriptExhaustedError, (self.calls,))


class RetryableBackendError(BackendError):
    """A transient failure (429, 408, 409, 5xx, 529, timeout, dropped connection); worth retrying.

    ``retry_after_s`` is the server's ``Retry-After`` when it sent one.
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_retryable, (str(self), self.status, self.retry_after_s))


def _rebuild_retryable(message: str, status: int | None, retry_after_s: float | None) -> RetryableBackendError:
    return RetryableBackendError(message, status=status, retry_after_s=retry_after_s)


class PermanentBackendError(BackendError):
    """The server refused the request itself (400, 404, 422): retrying cannot help; the task fails."""


class BackendUnavailableError(RetryableBackendError):
    """A backend failed every attempt of one call (`redraft.backends._retrying`): the server, not the request.

    ``endpoint`` is the backend's spec string (safe to print), so the driver can tell one endpoint's
    outage from another's without reading the message.
    """

    def __init__(
        self, message: str, *, endpoint: str, status: int | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message, status=status, retry_after_s=retry_after_s)
        self.endpoint = endpoint

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_unavailable, (str(self), self.endpoint, self.status, self.retry_after_s))


def _rebuild_unavailable(
    message: str, endpoint: str, status: int | None, retry_after_s: float | None
) -> BackendUnavailableError:
    return BackendUnavailableError(message, endpoint=endpoint, status=status, retry_after_s=retry_after_s)


class AuthenticationError(BackendError):
    """The credentials were refused (401, 403): every call would fail, so the whole run stops."""


class ProtocolError(RedraftError):
    """Bytes that are not a valid frame of this wire version, or a message that cannot be one.

    The message names the field path, e.g. ``Expected `int`, got `str` - at `$.round```. It is one
    line whatever the bytes: a control character quoted from them (a mutated ``kind``) is escaped.
    """

    def __init__(self, message: str) -> None:
        super().__init__("".join(c if c.isprintable() else repr(c)[1:-1] for c in message))


class SandboxError(RedraftError):
    """The sandbox could not be set up on this machine (a deployment problem, not the candidate's)."""


MachineryFault = Literal["died", "hung", "unreachable"]
"""How the machinery failed under a task: a process, node or object died (redo it elsewhere at once); a call
hung past its deadline, or a backend stayed unreachable (redo it after a backoff: the same may still hold)."""


class InfrastructureError(RedraftError):
    """The machinery failed while a task ran, not the task: the driver redoes it, and never records this.

    ``cause`` is the class name of what failed (``ActorDiedError``, ``CallTimeoutError``,
    ``BackendUnavailableError``...); ``fault`` how it failed; ``role`` the role whose call failed, when one
    did; ``endpoint`` the backend spec that stayed unreachable, when that was the cause.
    """

    def __init__(
        self,
        message: str,
        *,
        cause: str,
        fault: MachineryFault = "died",
        role: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.fault: MachineryFault = fault
        self.role = role
        self.endpoint = endpoint

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_infrastructure, (str(self), self.cause, self.fault, self.role, self.endpoint))


def _rebuild_infrastructure(
    message: str, cause: str, fault: MachineryFault, role: str | None, endpoint: str | None
) -> InfrastructureError:
    return InfrastructureError(message, cause=cause, fault=fault, role=role, endpoint=endpoint)


class CallTimeoutError(RedraftError):
    """A call to an actor did not come back before its deadline (the actor hung, or its node did)."""


class ClusterError(RedraftError):
    """The run cannot go on here: a role no live node can host, a backend down for good, a local Ray that did not
    start. Exit 1; rerun to resume."""


class Interrupted(RedraftError):
    """A request to stop (Ctrl-C, SIGTERM) ended the run: the tasks that landed are kept, those in flight were
    cancelled and not recorded; a rerun with the same ``--out`` resumes. ``done`` of ``total`` tasks are done."""

    def __init__(self, message: str = "interrupted", *, done: int = 0, total: int = 0) -> None:
        super().__init__(message)
        self.done = done
        self.total = total

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_interrupted, (str(self), self.done, self.total))


def _rebuild_interrupted(message: str, done: int, total: int) -> Interrupted:
    return Interrupted(message, done=done, total=total)


class PoisonTaskError(RedraftError):
    """A task whose every attempt ended with the machinery failing under it: it is taken to be the cause."""


class TaskRefusedError(BackendError):
    """The endpoint failed every attempt of this task's calls while it answered the run's other tasks: the
    evidence says the task's requests, not the server, are the cause."""


# ---------------------------------------------------------------- whose fault: the one table

MACHINERY: dict[str, dict[str, MachineryFault]] = {
    "ray.exceptions": {
        "RayActorError": "died",
        "ActorDiedError": "died",
        "ActorUnavailableError": "died",
        "ActorUnschedulableError": "died",
        "TaskUnschedulableError": "died",
        "WorkerCrashedError": "died",
        "NodeDiedError": "died",
        "LocalRayletDiedError": "died",
        "ObjectLostError": "died",
        "ObjectFreedError": "died",
        "ObjectReconstructionFailedError": "died",
        "OwnerDiedError": "died",
        "ReferenceCountingAssertionError": "died",
        "ObjectFetchTimedOutError": "hung",
        "ObjectStoreFullError": "died",
        "OutOfMemoryError": "died",
        "GetTimeoutError": "hung",
        "TaskCancelledError": "hung",
        "RaySystemError": "died",
        "RayCgraphCapacityExceeded": "died",
        "RayChannelError": "died",
        "RayChannelTimeoutError": "hung",
        "RayDirectTransportError": "died",
        "StreamingGeneratorReplayInconsistentError": "died",
    },
    "redraft.errors": {
        "InfrastructureError": "died",
        "CallTimeoutError": "hung",
        "BackendUnavailableError": "unreachable",
    },
}
"""The exceptions that are the machinery's failure, not the task's, by module and class name, with how each
failed (subclasses included; each is named too, because a record names its leaf class). A task that ends with
one is redone, never recorded. Every other exception is the task's own (a check that raised, a model that
answered nothing, a request the server refused).

Named, not imported: the code below the actor system never imports Ray, yet classifies Ray's errors by this
table, and a result record is classified by its ``error_type`` with the same names."""


def _fault_of(exc: BaseException) -> MachineryFault | None:
    """How ``exc`` is the machinery's failure (through its class's ancestry), or None when it is not."""
    for cls in type(exc).__mro__:
        fault = MACHINERY.get(cls.__module__, {}).get(cls.__name__)
        if fault is not None:
            return fault
    return None


def machinery_failure(exc: BaseException, *, role: str | None = None) -> InfrastructureError | None:
    """``exc`` as the machinery's failure (``role``: whose call failed), or None when it is the task's own.

    Ray's task-error wrapper is looked through: the wrapped cause decides, and the wrapper itself counts
    when Ray raised it for its own failure.
    """
    cause = cause_of(exc)
    if isinstance(cause, InfrastructureError):
        return cause
    fault = _fault_of(cause) or _fault_of(exc)
    if fault is None:
        return None
    endpoint = cause.endpoint if isinstance(cause, BackendUnavailableError) else None
    return InfrastructureError(describe(cause), cause=type(cause).__name__, fault=fault, role=role, endpoint=endpoint)


def member_failure(exc: BaseException) -> bool:
    """Whether a call failed because of the member that served it (dead, gone, hung): another member may answer.

    A backend that is down is not such a failure: every member calls the same server.
    """
    failure = machinery_failure(exc)
    return failure is not None and failure.fault != "unreachable"


def recorded_as_machinery(error_type: str | None) -> bool:
    """Whether a result record's ``error_type`` names the machinery's failure (so a resume redoes the task)."""
    if error_type is None:
        return False
    return any(error_type in names for names in MACHINERY.values())


def cause_of(exc: BaseException) -> BaseException:
    """The exception a Ray task error wraps (its ``cause``), else ``exc`` itself."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def describe(exc: BaseException) -> str:
    """One line naming an exception and its last message line, unwrapping Ray's task-error wrapper."""
    exc = cause_of(exc)
    text = plain_text(str(exc)).strip().splitlines()  # a message may quote a candidate's text: made plain here
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:500]


def error_type(exc: BaseException) -> str:
    """The class name of an exception (of its cause, behind Ray's wrapper): a task's typed error cause."""
    return type(cause_of(exc)).__name__


def missing_extra(what: str, extra: str) -> UserError:
    """The error for ``what`` used without the optional dependencies of redraft's ``extra``."""
    return UserError(f"{what} needs redraft's {extra!r} extra: pip install 'redraft[{extra}]'")
