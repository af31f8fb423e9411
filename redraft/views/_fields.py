"""What the views show of a frame besides the fields they render by name.

Both views (the HTML pages and the terminal trace) render the fields of each
known kind by name, and show everything else generically, as key/value pairs:
the ``extra`` fields of a known kind (a newer writer's), every field of a frame
with no slot of its own (a reflection, an unknown kind), and what a request adds
to the frames it carries. They leave out what says nothing: a known kind's
fields that hold their Struct's default (the frame did not use them: read from
the Struct, not listed here), extras that are empty (None, "", [], {}, 0,
False), and in a frame of unknown meaning only None, "", [] and {}, since a zero
may be data there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import msgspec

from redraft.protocols.messages import DraftRequest, Grade, Message, Result, Revision, Usage, VerifyRequest
from redraft.rundir.frames import Frame, KnownFrame, fields_of
from redraft.rundir.history import Round

USAGE_FIELDS = frozenset(Usage.__struct_fields__)
# What the views leave out of any frame: its kind's tag and its writer's wire version.
_ALWAYS_PLACED = ("kind", "v")
# A request repeats the task and the draft it carries, and the place it is listed under says
# the rest; its seed follows from the run's seed, task, round and sample; views show the revision apart.
_REQUEST_REPEATS = frozenset({"task", "draft", "task_id", "round", "sample", "seed", "revision", *_ALWAYS_PLACED})

TRACE_LOST = "the trace of this task was lost (a damaged or deleted trace.msgpack): its rounds cannot be shown"
"""What both views say of a task whose frames are lost (its result, shown, stands)."""


def extra(frame: KnownFrame[Any] | None) -> dict[str, Any]:
    """The fields of a known kind that its Struct does not know (a newer writer's), unless empty."""
    if frame is None or not frame.extra:
        return {}
    return {k: v for k, v in frame.extra.items() if not is_empty(v)}


def frame_fields(frame: Frame, placed: tuple[str, ...] = ("task_id",)) -> dict[str, Any]:
    """The fields of a frame shown generically, less those its place on the page already says.

    ``placed``: the keys the surrounding view implies (the task; the round it is
    listed under; the candidate it sits beside).
    """
    skip = {*_ALWAYS_PLACED, *placed}
    if isinstance(frame, KnownFrame):
        return {k: v for k, v in used_fields(frame).items() if k not in skip}
    return {k: v for k, v in fields_of(frame).items() if k not in skip and not is_blank(v)}


def used_fields(frame: KnownFrame[Any], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A typed frame's fields that do not hold their Struct's default, as plain values, and its extras."""
    message: msgspec.Struct = frame.message
    defaults = _defaults(type(message))
    used = {}
    for name in message.__struct_fields__:
        value = getattr(message, name)
        if name in skip or (name in defaults and value == defaults[name]):
            continue
        used[name] = value if value is None or isinstance(value, str | int | float) else msgspec.to_builtins(value)
    return used | {k: v for k, v in frame.extra.items() if k not in skip and not is_blank(v)}


@cache
def _defaults(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The default of each field of ``struct`` that has one."""
    defaults = {}
    for f in msgspec.structs.fields(struct):
        if f.default is not msgspec.NODEFAULT:
            defaults[f.name] = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            defaults[f.name] = f.default_factory()
    return defaults


def is_blank(value: Any) -> bool:
    """None, "", [] or {}: no content at all (zeros may be data in a frame of unknown meaning)."""
    return value is None or value == "" or value == [] or value == {}


def is_empty(value: Any) -> bool:
    """None, "", [], {}, 0, False, or a dict of such (an unused usage)."""
    if value is None or value == "" or value == [] or value == {} or value is False or value == 0:
        return True
    return isinstance(value, dict) and all(is_empty(v) for v in value.values())


def usage_line(value: Any) -> str | None:
    """A usage (a `Usage`, or its fields as a dict) in one line, or None if ``value`` is not one."""
    if isinstance(value, Usage):
        value = {k: getattr(value, k) for k in USAGE_FIELDS}
    if not isinstance(value, dict) or not value or not set(value) <= USAGE_FIELDS:
        return None
    line = (
        f"{value.get('calls', 0)} calls, {value.get('input_tokens', 0):,} in / "
        f"{value.get('output_tokens', 0):,} out tokens, ${value.get('cost_usd', 0.0):.4f}"
    )
    return line + (f", {value['cache_hits']} from the cache" if value.get("cache_hits") else "")


def request_news(rnd: Round) -> list[tuple[str, int, dict[str, Any]]]:
    """The round's requests as (kind, how many, fields), identical ones merged, those with news only.

    A request's news are the fields it adds to the frames it carries, less those
    that hold their default; the revision is left out too, since views show it on
    its own (`revision_of`).
    """
    groups: dict[tuple[str, str], tuple[str, int, dict[str, Any]]] = {}
    for request in rnd.requests:
        if isinstance(request, KnownFrame):
            news = _plan_news(request.message, used_fields(request, _REQUEST_REPEATS))
        else:
            news = {k: v for k, v in request.fields.items() if k not in _REQUEST_REPEATS and not is_empty(v)}
        if not news:
            continue
        key = (request.kind, repr(sorted(news.items())))
        _, count, _ = groups.get(key, (request.kind, 0, news))
        groups[key] = (request.kind, count + 1, news)
    return list(groups.values())


def _plan_news(request: Message, news: dict[str, Any]) -> dict[str, Any]:
    """A plan's ask or a step's run in a few words: the plan itself is shown by version, the run's output with its
    verification (a whole plan in every request would bury the round)."""
    if isinstance(request, DraftRequest) and request.plan is not None:
        ask = request.plan
        retry = " again, after a failed attempt" if ask.code else ""
        said = {"plan": "write the plan", "step": f"write step {ask.step}'s program{retry}"}
        after = f"step {ask.step} ran" if ask.step is not None else "the whole program ran"
        news["plan"] = said.get(ask.kind, f"decide what to do: {after}")
    if isinstance(request, VerifyRequest) and request.step is not None:
        carried = ", ".join(sorted(request.step.files)) or "no earlier output"
        news["step"] = f"run step {request.step.step.number} over the task's files and {carried}"
    return news


def revision_of(rnd: Round) -> Revision | None:
    """What the drafter was told when revising in this round (the first draft request's revision)."""
    for request in rnd.requests:
        if isinstance(request, KnownFrame) and isinstance(request.message, DraftRequest) and request.message.revision:
            return request.message.revision
    return None


LeadBasis = Literal["graded", "judged", "feedback"]
"""What a task's verdict rests on: the scenario's held-out grade, a judge's, or (nothing held out) the feedback."""


@dataclass(frozen=True)
class Lead:
    """What a task's page and its trace lead with: the verdict the task is judged by, on what basis, in words.
    The held-out grade when there is one (the loop's own verdict comes after it, never instead)."""

    basis: LeadBasis
    passed: bool
    said: str


def task_lead(r: Result, grade: Grade | None) -> Lead:
    """The lead of task ``r`` (``grade``: its `Grade` frame, which names a judge; None when lost or absent)."""
    if r.graded_pass is None:
        return Lead("feedback", r.passed, f"no held-out grade: the loop's own verdict, score {r.score:.3f}")
    first = "not graded" if r.initial_graded_pass is None else ("pass" if r.initial_graded_pass else "fail")
    shown = "?" if r.grade is None else f"{r.grade:.3f}"
    judge = grade.judge if grade is not None else None
    if judge is not None or "judge" in r.usage_by_role:
        return Lead("judged", r.graded_pass, f"judged by {judge or 'a judge'}: grade {shown} (first draft: {first})")
    return Lead("graded", r.graded_pass, f"held-out grade {shown} (first draft: {first})")
