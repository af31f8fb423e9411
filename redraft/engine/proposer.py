"""The proposer of ``redraft tune``: a model that rewrites one section of the prompts from train feedback.

`ProposeRequest` in, `Proposal` out. The request is rendered with the ``tune_system`` and ``tune_user``
templates, the section's text, its history and the examples fenced as data; the reply follows a JSON
schema (``{"reason", "text"}``, a grammar for the embedded model) and is checked before it is returned.
An edit is refused, with its reason, when:

- ``unreadable``: the reply holds no JSON object with a non-empty ``text`` string;
- ``unchanged``: the text is the current one, up to white space;
- ``placeholders``: it drops a ``$placeholder`` the section fills, adds one nothing fills, or has a
  ``$`` that is no placeholder (`redraft.engine.prompt_files` would refuse the file);
- ``too_long``: it is longer than `limit_of` allows (a section may grow, not balloon).

So a small model's broken edit is one refused proposal, counted, never an evaluation paid for nothing.
"""

from __future__ import annotations

import itertools
import json
import re
from string import Template
from typing import Any

import msgspec

from redraft.backends.base import BackendSpec, ChatRequest
from redraft.engine._answers import edit_json_schema
from redraft.engine._model_role import CallSettings, ModelRole
from redraft.engine.prompts import MAX_FEEDBACK_CHARS, built_in, cut
from redraft.errors import ContextTooLong
from redraft.protocols.bounds import MAX_REPLY_BYTES, json_too_deep
from redraft.protocols.messages import ChatMessage
from redraft.protocols.tuning import Edit, Example, Judged, Proposal, ProposeRequest

GROWTH_CHARS = 1_500
"""How many characters a section may grow by in one edit."""
MAX_SECTION_CHARS = 6_000
"""The most characters a section may have."""
REFUSALS = ("unreadable", "unchanged", "placeholders", "too_long")
PROPOSAL_MAX_TOKENS = 1_024
SHORTER_TRIES = 3
"""How many times a request the model's context cannot hold is asked again, shorter (`shorter`)."""
EXAMPLES_CHARS = 3 * MAX_FEEDBACK_CHARS
"""Characters of a request's examples in the proposer's prompt (each example is cut before)."""
_SCHEMA = edit_json_schema()


def limit_of(text: str) -> int:
    """The most characters an edit of ``text`` may have."""
    return min(MAX_SECTION_CHARS, len(text) + GROWTH_CHARS)


def tokens_for(limit: int) -> int:
    """The most tokens a reply needs for a text of ``limit`` characters and its reason (a token is 3 or more
    characters of English; the reason's schema holds it to 300)."""
    return limit // 3 + 160


def placeholders_of(text: str) -> list[str]:
    """The ``$names`` a template text uses, sorted."""
    return sorted(set(Template(text).get_identifiers()))


class Proposer(ModelRole):
    """Rewrites one section per request, from what the request holds and nothing else."""

    def __init__(self, backend: BackendSpec, settings: CallSettings) -> None:
        super().__init__(backend, settings)

    async def propose(self, request: ProposeRequest) -> Proposal:
        asked = request
        for attempt in range(SHORTER_TRIES + 1):
            try:
                completion = await self._backend.complete(
                    ChatRequest(
                        messages=proposer_messages(asked),
                        max_tokens=min(self._max_tokens, tokens_for(request.limit)),
                        temperature=self._temperature,
                        seed=request.seed,
                        json_schema=_SCHEMA,
                    )
                )
                break
            except ContextTooLong:
                if attempt == SHORTER_TRIES:
                    raise
                asked = shorter(asked)  # a small model's context: the same ask, with fewer and shorter examples
        edit = read_edit(completion.text, request.section, request.text)
        cut_short = edit.refused == "unreadable" and completion.finish_reason == "length"
        return Proposal(
            section=edit.section,
            text=edit.text,
            reason=edit.reason,
            refused=edit.refused,
            detail=edit.detail + (" (the reply was cut at its max tokens)" if cut_short else ""),
            usage=completion.usage,
            model=completion.model,
            finish_reason=completion.finish_reason,
        )


def shorter(request: ProposeRequest) -> ProposeRequest:
    """``request`` with half its examples (one at least), each cut to half, and its history's texts cut: what
    a model whose context the whole request overflows can still be asked."""
    examples = [
        msgspec.structs.replace(
            e,
            prompt=cut(e.prompt, max(200, len(e.prompt) // 2)),
            answer=cut(e.answer, max(200, len(e.answer) // 2)),
            judged=None if e.judged is None else _halved(e.judged),
        )
        for e in request.examples[: max(1, len(request.examples) // 2)]
    ]
    history = [msgspec.structs.replace(h, text=cut(h.text, max(200, len(h.text) // 2))) for h in request.history[-2:]]
    return msgspec.structs.replace(request, examples=examples, history=history)


def _halved(judged: Judged) -> Judged:
    answer, comment = judged.answer, judged.comment
    return msgspec.structs.replace(
        judged, answer=cut(answer, max(200, len(answer) // 2)), comment=cut(comment, max(200, len(comment) // 2))
    )


def proposer_messages(request: ProposeRequest) -> list[ChatMessage]:
    """The proposer's prompt: the built-in ``tune_*`` templates (a tune never edits its own proposer)."""
    prompts = built_in()
    user = prompts.render(
        "tune_user",
        section=request.section,
        text=request.text,
        placeholders=", ".join(f"${name}" for name in request.placeholders) or "none",
        limit=request.limit,
        history=cut("\n\n".join(_edit_lines(edit) for edit in request.history) or "(none yet)", MAX_FEEDBACK_CHARS),
        feedback=f"{request.feedback:.2f}",
        examples=cut("\n\n".join(_example_lines(i, e) for i, e in enumerate(request.examples, 1)), EXAMPLES_CHARS),
    )
    return [ChatMessage(role="system", content=prompts.render("tune_system")), ChatMessage(role="user", content=user)]


def _edit_lines(edit: Edit) -> str:
    score = "not tried" if edit.feedback is None else f"{edit.feedback:.2f}"
    return f"version {edit.version} (feedback {score}; {edit.reason or 'the starting text'}):\n{cut(edit.text, 800)}"


def _example_lines(number: int, example: Example) -> str:
    lines = [f"Task {number} (feedback {example.feedback:.2f}):", example.prompt, "Answer:", example.answer]
    lines += [f"- check {f.check} failed: {f.detail}" for f in example.failures]
    lines += [f"- reviewer: {issue}" for issue in example.issues]
    if (judged := example.judged) is not None:
        score = "" if judged.score is None else f", score {judged.score:.2f}"
        said = f": {judged.comment}" if judged.comment else ""
        lines += [
            f"A person judged an earlier answer to this task {judged.verdict.upper()}{score}{said}",
            "That answer:",
        ]
        lines.append(judged.answer)
    return "\n".join(lines)


def read_edit(reply: str, section: str, parent: str) -> Proposal:
    """The proposer's reply as a `Proposal` (no usage): the new text and its reason, or the refusal and why."""
    found = _object_in(reply)
    if found is None or not isinstance(found.get("text"), str) or not found["text"].strip():
        return _refused(section, "unreadable", 'no JSON object with a non-empty "text" string', found)
    text = found["text"].strip("\n")
    if " ".join(text.split()) == " ".join(parent.split()):
        return _refused(section, "unchanged", "the text is the current one", found)
    template = Template(text)
    if not template.is_valid():
        return _refused(section, "placeholders", "a '$' that is no placeholder (write '$$' for a dollar sign)", found)
    have, need = set(template.get_identifiers()), set(placeholders_of(parent))
    if have != need:
        said = [f"drops ${', $'.join(sorted(need - have))}"] if need - have else []
        said += [f"adds ${', $'.join(sorted(have - need))}, which nothing fills"] if have - need else []
        return _refused(section, "placeholders", "; ".join(said), found)
    if len(text) > limit_of(parent):
        return _refused(section, "too_long", f"{len(text):,} characters, over the limit of {limit_of(parent):,}", found)
    return Proposal(section=section, text=text, reason=_reason(found))


def _reason(found: dict[str, Any] | None) -> str:
    return " ".join(str(found.get("reason", "")).split())[:600] if found else ""


def _refused(section: str, why: str, detail: str, found: dict[str, Any] | None) -> Proposal:
    return Proposal(section=section, text=None, reason=_reason(found), refused=why, detail=detail)


_OPEN = re.compile(r"\{")
_MAX_STARTS = 50


def _object_in(reply: str) -> dict[str, Any] | None:
    """The first JSON object in the reply (fenced, in prose, or the whole of it) that has a ``text``.

    None for a reply over the size of one (`redraft.protocols.bounds`), nested too deep, or whose first
    `_MAX_STARTS` braces start none: each try may read to the end, so more would make it quadratic."""
    if len(reply) > MAX_REPLY_BYTES or json_too_deep(reply):
        return None
    decoder = json.JSONDecoder()
    for match in itertools.islice(_OPEN.finditer(reply), _MAX_STARTS):
        try:
            value, _ = decoder.raw_decode(reply, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and "text" in value:
            return value
    return None
