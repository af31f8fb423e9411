"""Scripted judges for the judge's tests: each reads the answers out of the prompt's fences and is built to
judge in one known way (faithful, or biased in one way each), so a calibration's figures can be predicted.

An answer in these tests is right when it holds the word ``CORRECT``. Each function is a reply function for
`redraft.backends.ScriptedBackend` (``scripted:tests.support.judges:NAME`` from the command line)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from redraft.backends import ChatRequest
from redraft.engine.prompts import fenced

LONG = 200
"""Characters above which the length-biased judge takes an answer for a good one."""

RUBRIC = {
    "name": "test",
    "threshold": 0.7,
    "criteria": [
        {
            "name": "correct",
            "weight": 2,
            "description": "The answer is right.",
            "levels": [
                {"name": "good", "score": 1.0, "description": "Right."},
                {"name": "bad", "score": 0.0, "description": "Wrong."},
            ],
        },
        {
            "name": "clear",
            "description": "The answer is easy to follow.",
            "levels": [
                {"name": "good", "score": 1.0, "description": "Clear."},
                {"name": "bad", "score": 0.0, "description": "Muddled."},
            ],
        },
    ],
}


def _criteria(request: ChatRequest) -> list[str]:
    schema = request.json_schema or {}
    return list(schema["properties"]["criteria"]["items"]["properties"]["criterion"]["enum"])


def _grade(request: ChatRequest, good: bool) -> str:
    level = "good" if good else "bad"
    return json.dumps({"criteria": [{"criterion": c, "level": level, "reason": "because"} for c in _criteria(request)]})


def _pair(winner: str) -> str:
    return json.dumps({"winner": winner, "reason": "because"})


def _judge(rubric: Callable[[str], bool], pair: Callable[[str, str], str]) -> Callable[[ChatRequest], str]:
    def reply(request: ChatRequest) -> str:
        texts = fenced(request.messages[-1].content)
        if (request.json_schema or {}).get("title") == "grade":
            return _grade(request, rubric(texts[2]))
        return _pair(pair(texts[1], texts[2]))

    return reply


def _right_one(first: str, second: str) -> str:
    a, b = "CORRECT" in first, "CORRECT" in second
    return "tie" if a == b else "first" if a else "second"


faithful = _judge(lambda text: "CORRECT" in text, _right_one)
"""Grades by the answer's content alone, and picks the right one of two whatever the order."""

first = _judge(lambda text: "CORRECT" in text, lambda a, b: "first")
"""Grades by content, but in a pair always prefers the answer shown first."""

longer = _judge(
    lambda text: len(text) > LONG, lambda a, b: "tie" if len(a) == len(b) else "first" if len(a) > len(b) else "second"
)
"""Takes a long answer for a good one, and prefers the longer of two."""


def noisy(request: ChatRequest) -> str:
    """Decides at random, differently for each seed: no agreement beyond chance, and no repeatability."""
    texts = fenced(request.messages[-1].content)
    draw = random.Random(f"{request.seed}\0{texts}").random() < 0.5
    if (request.json_schema or {}).get("title") == "grade":
        return _grade(request, draw)
    return _pair("first" if draw else "second")


def broken(request: ChatRequest) -> str:
    """Answers in prose, never in the schema."""
    return "I think it is rather good."
