"""A small world for ``redraft tune``'s tests: sums to write in one exact form, with models and a proposer
scripted so that the effect of a prompt is known.

- `check` (the feedback) passes a reply of the form ``SUM=<number>`` and says so when it fails; `grade`
  (held out) passes it when the number is the task's gold sum, read only from that form.
- `rule_follower`: a drafter that writes the form only when its system prompt asks for it (the rule a tune
  must find); `coin_flipper`: a drafter whose answers do not depend on what the prompt says, only on a
  hash of it (noise a tune must not mistake for a gain).
- `reading_proposer`: a proposer that adds the rule a failed check's detail states, read from the request
  (so the rule reaches the prompt only through the feedback of train tasks), else a harmless sentence.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from redraft.backends.base import ChatRequest
from redraft.protocols.tuning import Proposal, ProposeRequest

RULE = "Reply only with SUM=<number>."
_FORM = re.compile(r"^SUM=(-?\d+)$")
_TASK = re.compile(r"Add (\d+) and (\d+)\.")


def write_tasks(path: Path, count: int) -> Path:
    lines = []
    for i in range(count):
        a, b = 11 + 7 * i, 5 + 3 * i
        lines.append(json.dumps({"id": f"sum-{i:03d}", "prompt": f"Add {a} and {b}.", "reference": {"sum": a + b}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def check(text: str, data: dict[str, Any]) -> tuple[float, str]:
    if _FORM.match(text.strip()):
        return 1.0, "the reply has the form SUM=<number>"
    return 0.0, "the reply is not of the form SUM=<number>; " + RULE


def grade(text: str, data: dict[str, Any]) -> bool:
    found = _FORM.match(text.strip())
    return found is not None and int(found.group(1)) == int(data["sum"])


def _sum_in(request: ChatRequest) -> int:
    found = _TASK.search(request.messages[-1].content)
    assert found is not None, request.messages[-1].content
    return int(found.group(1)) + int(found.group(2))


def rule_follower(request: ChatRequest) -> str:
    total = _sum_in(request)
    return f"SUM={total}" if RULE in request.messages[0].content else f"The sum is {total}."


def coin_flipper(request: ChatRequest) -> str:
    total = _sum_in(request)
    seen = request.messages[0].content + request.messages[-1].content
    heads = hashlib.sha256(seen.encode()).digest()[0] % 2 == 0
    return f"SUM={total}" if heads else f"SUM={total + 1}"


def reading_proposer(request: ProposeRequest) -> Proposal:
    said = [f.detail for e in request.examples for f in e.failures]
    if any(RULE in detail for detail in said) and RULE not in request.text:
        return Proposal(section=request.section, text=f"{request.text}\n{RULE}", reason="the checks ask for the form")
    line = f"Be exact (edit {request.seed % 1000})."
    return Proposal(section=request.section, text=f"{request.text}\n{line}", reason="clarify")
