"""A finished loop as the client reads it: the refined answer, the usage of every internal call, the ``redraft``
object (the trace's id, rounds, stop reason, per-role usage and cost), or the error that stands for a loop with
no answer."""

from __future__ import annotations

from typing import Any

from redraft.errors import AuthenticationError, InfrastructureError
from redraft.protocols.messages import Result, Usage
from redraft.serving._openai import APIError
from redraft.serving._refiner import Prepared

RETRY_AFTER_S = 5
"""What a 503 asks the client to wait: a model endpoint down, or the replica's machinery failing."""


def openai_usage(usage: Usage) -> dict[str, Any]:
    """Every internal call's tokens, in OpenAI's ``usage`` shape."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def _role_usage(usage: Usage) -> dict[str, Any]:
    return {
        "calls": usage.calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd,
    }


def redraft_object(result: Result, prepared: Prepared, run: str) -> dict[str, Any]:
    """What the response says of the loop behind it (``run``: the run directory under the server's ``--out``),
    with the server's warnings about the request (`redraft.serving._refiner.Notice`)."""
    strategy = prepared.strategy
    return {
        "trace_id": result.task_id,
        "run": run,
        "strategy": strategy,
        "rounds": result.rounds,
        "stop_reason": result.stop_reason,
        "score": result.score,
        "passed": result.passed,
        "calls": result.usage.calls,
        "cost_usd": result.usage.cost_usd,
        "usage_by_role": {role: _role_usage(usage) for role, usage in sorted(result.usage_by_role.items())},
        "warnings": [{"code": notice.code, "message": notice.message} for notice in prepared.notices],
    }


def failure(result: Result) -> APIError | None:
    """The error a loop that ended with no answer stands for; None when it has one."""
    if result.text:
        return None
    trace = f" (trace {result.task_id})"
    if result.stop_reason == "budget" and result.stop_limit == "task_timeout":
        return APIError(504, f"the request's loop had no answer within the server's request timeout{trace}", "timeout")
    if result.stop_reason == "budget":
        return APIError(
            429,
            f"the request's {result.stop_limit} budget was spent before any answer{trace}",
            "insufficient_quota",
            code="budget_spent",
        )
    if result.error_type == "CheckError":
        return APIError(500, f"the check raised instead of judging the answer: {result.error}{trace}", "server_error")
    return APIError(
        502, f"the model gave no usable answer: {result.error or result.stop_reason}{trace}", "server_error"
    )


def machinery_error(exc: Exception) -> APIError:
    """A loop the machinery failed under (a model endpoint down, an actor of the loop lost, the upstream key
    refused)."""
    if isinstance(exc, AuthenticationError):
        return APIError(502, "the model provider refused this server's credentials", "server_error")
    if isinstance(exc, InfrastructureError):
        message = f"the machinery under the request failed: {exc}"
        return APIError(503, message, "service_unavailable", retry_after_s=RETRY_AFTER_S)
    return APIError(500, f"the request failed: {type(exc).__name__}", "server_error")


def stopped() -> APIError:
    """A loop cut because the server is stopping and its drain (``--drain-timeout``) is over."""
    return APIError(
        503,
        "the server stopped before this request's loop finished (it was not recorded); retry",
        "service_unavailable",
        retry_after_s=RETRY_AFTER_S,
    )
