"""Check functions for the task-file tests; verifier actors import this module by name.

The name is ``tests.support.check_modules``: a dotted path from the repository root, as a user names
a module beside their task file.
"""

from __future__ import annotations

import re
from typing import Any

SYSTEM_PROMPT = "Answer the question. End with a line 'Answer: <answer>'."


def exact_answer(text: str, reference: dict[str, Any]) -> tuple[float, str]:
    """The documented example (docs/scenarios/your-own.md): the last 'Answer: ...' line must equal
    reference['answer'] (ignoring case)."""
    found = re.findall(r"Answer:\s*(.+)", text)
    if not found:
        return 0.0, "no line 'Answer: ...' found"
    if found[-1].strip().casefold() == str(reference["answer"]).casefold():
        return 1.0, "correct"
    return 0.0, f"the answer {found[-1].strip()!r} is wrong"


def by_reference(text: str, reference: dict[str, Any]) -> Any:
    """exact_answer, or a broken contract when the task asks for one (``"misbehave"`` in its reference)."""
    match reference.get("misbehave"):
        case "wrong_type":
            return "looks fine to me"
        case "out_of_range":
            return (1.5, "too good")
        case "bare_true":
            return True
    return exact_answer(text, reference)  # a reference without "answer" raises KeyError here


def share_of_keywords(text: str, reference: dict[str, Any]) -> float:
    """A bare score: the share of reference['keywords'] found in the text."""
    keywords = list(reference["keywords"])
    return sum(k.casefold() in text.casefold() for k in keywords) / len(keywords)


def echoes_the_candidate(text: str, reference: dict[str, Any]) -> tuple[float, str]:
    """A harness that fails every answer and echoes it in its detail, as a failing test prints the program's output."""
    return 0.0, f"the program printed:\n{text}"


def with_prompt(text: str, data: dict[str, Any], prompt: str) -> tuple[float, str]:
    """A check that reads the task's prompt and its feedback data: the answer must be data['answer'], and
    the prompt must be the one the data says it is for."""
    if data.get("for_prompt") != prompt:
        return 0.0, f"the check was given the prompt {prompt!r}"
    return exact_answer(text, data)
