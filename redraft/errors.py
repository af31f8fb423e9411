"""One exception hierarchy for redraft, each class naming whose mistake it is.

- `UserError`: the person running redraft asked for something invalid (a bad flag,
  an unknown scenario, a missing model file). The CLI prints it as one line, exit 2.
- `ModelError`: a model misbehaved (garbage where JSON was required, an empty reply).
  It ends one task's step, never the run.
- `CheckError`: a scenario's check raised instead of judging a candidate; it ends that task.
- `BackendError`: the transport to a model failed (server down, HTTP error).
- `ProtocolError`: bytes on the wire did not decode, or a message could not be encoded (a bug or a
  corrupt frame, never the model's text).
- `SandboxError`: the sandbox for untrusted code could not be set up on this machine.

Errors raised inside Ray actors are pickled back to the caller, so every class
with extra constructor arguments defines `__reduce__`.
"""

from __future__ import annotations


class RedraftError(Exception):
    """Base of every error redraft raises on purpose."""


class UserError(RedraftError):
    """The caller's input or configuration is invalid; fix the input and rerun."""


class ModelError(RedraftError):
    """A model returned something unusable; the step that needed it fails."""


class CheckError(RedraftError):
    """A scenario's check raised instead of judging the candidate: a bug in the check, not evidence.

    It ends the task with stop reason ``error`` (cause ``CheckError``); a score of 0
    would blame the candidate for the check's fault.
    """


class BackendError(RedraftError):
    """Talking to a model backend failed (transport, server, runtime)."""


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


class AuthenticationError(BackendError):
    """The credentials were refused (401, 403): every call would fail, so the whole run stops."""


class ProtocolError(RedraftError):
    """Bytes that are not a valid frame of this wire version, or a message that cannot be one.

    The message names the field path, e.g. ``Expected `int`, got `str` - at `$.round```.
    """


class SandboxError(RedraftError):
    """The sandbox could not be set up on this machine (a deployment problem, not the candidate's)."""


def cause_of(exc: BaseException) -> BaseException:
    """The exception a Ray task error wraps (its ``cause``), else ``exc`` itself."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def describe(exc: BaseException) -> str:
    """One line naming an exception and its last message line, unwrapping Ray's task-error wrapper."""
    exc = cause_of(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:500]


def error_type(exc: BaseException) -> str:
    """The class name of an exception (of its cause, behind Ray's wrapper): a task's typed error cause."""
    return type(cause_of(exc)).__name__
