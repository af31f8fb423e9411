"""One task's frames as a tree of spans: the task, its rounds, each role's model call; no OpenTelemetry here.

The tree (`SpanData`) is what `redraft.telemetry._otlp` hands to the OpenTelemetry SDK:

- ``redraft.task``: the task's outcome (stop reason, score, grade, rounds) and what it spent in all;
- ``redraft.round``, one per round a reply or a decision names: the decision (action, reason, scores);
- ``chat MODEL``, one per reply that reports a model call (a draft, a critique, a reflection, a verification
  that asked its model questions), with the GenAI semantic conventions' attributes (`GEN_AI`): the operation,
  the provider, the requested and the answering model, input and output tokens, the finish reason; and
  redraft's own: the role, round and sample, and the call's cost as the run's price table prices it;
- ``chat MODEL`` under the task itself for a judge's calls (``--judge``, role ``judge``), reported by the task's
  `Grade` after the loop: the same attributes but round and sample (it judges answers of several), at the
  task's end (its time is not the loop's).

See docs/architecture.md, section "Spans: whose call, and when".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from redraft.backends.pricing import PriceTable
from redraft.protocols.messages import Critique, Decision, Draft, Grade, Reflection, Result, Usage, Verification
from redraft.rundir import Frame, KnownFrame

AttributeValue = str | bool | int | float | list[str]
Attributes = dict[str, AttributeValue]


class GEN_AI:
    """The GenAI semantic conventions' attribute names (OpenTelemetry semantic conventions 1.37 and later:
    ``gen_ai.provider.name`` replaced ``gen_ai.system``)."""

    OPERATION_NAME = "gen_ai.operation.name"
    PROVIDER_NAME = "gen_ai.provider.name"
    REQUEST_MODEL = "gen_ai.request.model"
    RESPONSE_MODEL = "gen_ai.response.model"
    RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
    USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
    USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
    USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"


CHAT = "chat"
"""The operation every role call is: a Chat Completions or Messages call."""
PROVIDERS = {"openai": "openai", "azure": "azure.ai.openai", "anthropic": "anthropic"}
"""A spec's prefix -> the conventions' well-known provider name; any other prefix is its own name (``local``,
``openai-compatible``, ``scripted``)."""
_URL = re.compile(r"@(?=https?://)")
Call = Draft | Critique | Reflection | Verification


@dataclass
class SpanData:
    """One span: its name, its time (seconds since the epoch), its attributes, its children."""

    name: str
    start_s: float
    end_s: float
    attributes: Attributes
    client: bool = False
    """A call to a model service (span kind CLIENT, as the conventions ask); else INTERNAL."""
    error: str | None = None
    """The span's status is ERROR with this description."""
    children: list[SpanData] = field(default_factory=list)

    def walk(self) -> list[SpanData]:
        """This span and every span under it, parents first."""
        return [self, *(span for child in self.children for span in child.walk())]


@dataclass(frozen=True)
class RunFacts:
    """What every task's spans need from its run: each role's backend spec, and the price table."""

    specs: dict[str, str]
    """`RoleName` -> the spec its calls went to (``openai:gpt-4o-mini``, ``azure:prod@https://...``)."""
    prices: PriceTable


def provider_of(spec: str) -> str:
    """The conventions' provider name of a backend spec."""
    prefix = spec.split("?", 1)[0].partition(":")[0]
    return PROVIDERS.get(prefix, prefix or "unknown")


def requested_model(spec: str, answered: str) -> str:
    """The model a spec asks for: its model or deployment (a GGUF file's name for ``local:``), else the
    answering model."""
    prefix, _, rest = spec.split("?", 1)[0].partition(":")
    model = _URL.split(rest, maxsplit=1)[0]
    return (PurePath(model).name if prefix == "local" else model) or answered or prefix


def role_of(message: Call) -> str:
    """The role whose call a reply reports (see the module docstring)."""
    match message:
        case Draft() | Reflection():
            return "drafter"
        case Verification():
            return "verifier"
        case Critique(stance="self"):
            return "self_critic"
    return "critic"


def task_span(frames: Sequence[Frame], result: Result, end_s: float, facts: RunFacts) -> SpanData:
    """The span tree of one task: its rounds, each with its calls, laid out in ``[end_s - wall_s, end_s]``."""
    messages = [frame.message for frame in frames if isinstance(frame, KnownFrame)]
    calls = [m for m in messages if isinstance(m, Call) and m.usage.calls > 0]
    decisions = {m.round: m for m in messages if isinstance(m, Decision)}
    rounds = sorted({c.round for c in calls} | set(decisions))
    start_s = end_s - max(result.wall_s, 0.0)
    span = SpanData("redraft.task", start_s, end_s, _task_attributes(result), error=_error(result))
    for number, (begin, end) in _layout(rounds, calls, start_s, end_s).items():
        mine = [c for c in calls if c.round == number]
        round_span = SpanData("redraft.round", begin, end, _round_attributes(number, decisions.get(number)))
        drafted = min(begin + max((d.latency_s for d in mine if isinstance(d, Draft)), default=0.0), end)
        for call in mine:
            at = (begin, min(begin + call.latency_s, end)) if isinstance(call, Draft) else (drafted, end)
            round_span.children.append(_call_span(call, *at, facts))
        span.children.append(round_span)
    for grade in (m for m in messages if isinstance(m, Grade) and m.usage.calls > 0):
        span.children.append(_judge_span(grade, end_s, facts))
    return span


def _layout(rounds: list[int], calls: list[Call], start_s: float, end_s: float) -> dict[int, tuple[float, float]]:
    """Each round's time: a share of the task's, by its slowest draft's latency (equal shares without one)."""
    slowest = {
        r: max((c.latency_s for c in calls if isinstance(c, Draft) and c.round == r), default=0.0) for r in rounds
    }
    total = sum(slowest.values())
    weights = slowest if total > 0 else dict.fromkeys(rounds, 1.0)
    whole = sum(weights.values()) or 1.0
    placed, at, share = {}, start_s, 0.0
    for number in rounds:
        share += weights[number]
        until = end_s if number == rounds[-1] else min(start_s + (end_s - start_s) * share / whole, end_s)
        placed[number] = (at, until)  # the last ends at the task's end exactly: no rounding past it
        at = until
    return placed


def _call_span(call: Call, start_s: float, end_s: float, facts: RunFacts) -> SpanData:
    role = role_of(call)
    model, attributes = _chat_attributes(role, call.model, call.usage, facts)
    attributes |= {"redraft.round": call.round, "redraft.sample": call.sample}
    if isinstance(call, Draft) and call.finish_reason:
        attributes[GEN_AI.RESPONSE_FINISH_REASONS] = [call.finish_reason]
    error = call.error if isinstance(call, Critique) else None
    return SpanData(f"{CHAT} {model}", start_s, end_s, attributes, client=True, error=error)


def _judge_span(grade: Grade, at_s: float, facts: RunFacts) -> SpanData:
    model, attributes = _chat_attributes("judge", grade.judge or "", grade.usage, facts)
    return SpanData(f"{CHAT} {model}", at_s, at_s, attributes, client=True, error=grade.error)


def _chat_attributes(role: str, answered: str, usage: Usage, facts: RunFacts) -> tuple[str, Attributes]:
    """A model call's requested model and its attributes: the conventions', then redraft's (role, cost)."""
    spec = facts.specs.get(role, "")
    model = requested_model(spec, answered)
    cost = facts.prices.cost(answered, usage)
    attributes: Attributes = {
        GEN_AI.OPERATION_NAME: CHAT,
        GEN_AI.PROVIDER_NAME: provider_of(spec),
        GEN_AI.REQUEST_MODEL: model,
        GEN_AI.USAGE_INPUT_TOKENS: usage.input_tokens,
        GEN_AI.USAGE_OUTPUT_TOKENS: usage.output_tokens,
        GEN_AI.USAGE_CACHE_READ_INPUT_TOKENS: usage.cached_tokens,
        "redraft.role": role,
        "redraft.calls": usage.calls,
        "redraft.cost_usd": cost or 0.0,
        "redraft.priced": cost is not None,
        "redraft.cache_hits": usage.cache_hits,
        "redraft.batch_calls": usage.batch_calls,
    }
    if answered:
        attributes[GEN_AI.RESPONSE_MODEL] = answered
    return model, attributes


def _task_attributes(result: Result) -> Attributes:
    attributes: Attributes = {
        "redraft.task.id": result.task_id,
        "redraft.scenario": result.scenario,
        "redraft.stop_reason": result.stop_reason,
        "redraft.passed": result.passed,
        "redraft.score": result.score,
        "redraft.initial_score": result.initial_score,
        "redraft.rounds": result.rounds,
        "redraft.attempts": result.attempts,
        "redraft.wall_s": result.wall_s,
        **usage_attributes(result),
    }
    optional: dict[str, AttributeValue | None] = {
        "redraft.grade": result.grade,
        "redraft.graded_pass": result.graded_pass,
    }
    optional |= {"redraft.error_type": result.error_type, "redraft.stop_limit": result.stop_limit}
    attributes.update({key: value for key, value in optional.items() if value is not None})
    return attributes


def usage_attributes(result: Result) -> Attributes:
    """A task's totals, as ``redraft.usage.*`` (never ``gen_ai.usage.*``, which a backend sums over calls)."""
    usage = result.usage
    return {
        "redraft.usage.input_tokens": usage.input_tokens,
        "redraft.usage.output_tokens": usage.output_tokens,
        "redraft.usage.calls": usage.calls,
        "redraft.cost_usd": usage.cost_usd,
    }


def _round_attributes(number: int, decision: Decision | None) -> Attributes:
    attributes: Attributes = {"redraft.round": number}
    if decision is not None:
        attributes |= {
            "redraft.action": decision.action,
            "redraft.best_score": decision.best_score,
            "redraft.round_best_score": decision.round_best_score,
            "redraft.rolled_back": decision.rolled_back,
        }
        if decision.reason is not None:
            attributes["redraft.stop_reason"] = decision.reason
    return attributes


def _error(result: Result) -> str | None:
    if result.stop_reason != "error":
        return None
    return f"{result.error_type or 'error'}: {result.error or ''}"[:200]
