"""Scripted judges for the judge's tests: each reads the answers out of the prompt's fences and is built to
judge in one known way (faithful, or biased in one way each), so a calibration's figures can be predicted.

An answer in these tests is right when it holds the word ``CORRECT``. Each function is a reply function for
`redraft.backends.ScriptedBackend` (``scripted:tests.support.judges:NAME`` from the command line)."""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from typing import Any

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


def criteria_of(schema: dict[str, Any]) -> list[str]:
    """The criteria a grade's schema asks for, in its order (one entry each, `rubric_schema`)."""
    return [entry["properties"]["criterion"]["enum"][0] for entry in schema["properties"]["criteria"]["prefixItems"]]


def _criteria(request: ChatRequest) -> list[str]:
    schema = request.json_schema or {}
    return criteria_of(schema)


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


def _by_levels(levels: Callable[[str, str], dict[str, str]], weights: dict[str, float]) -> Callable[[ChatRequest], str]:
    """A judge that names ``levels(task, answer)`` for a rubric grade, and in a pair prefers the answer whose
    levels score higher by ``weights`` (of the top level, 1, against any other, 0), whatever the order."""

    def points(task: str, text: str) -> float:
        return sum(w for name, w in weights.items() if levels(task, text)[name] == _TOP[name])

    def reply(request: ChatRequest) -> str:
        texts = fenced(request.messages[-1].content)
        if (request.json_schema or {}).get("title") == "grade":
            chosen = levels(texts[0], texts[2])
            return json.dumps(
                {"criteria": [{"criterion": c, "level": chosen[c], "reason": "because"} for c in _criteria(request)]}
            )
        first, second = points(texts[0], texts[1]), points(texts[0], texts[2])
        return _pair("tie" if first == second else "first" if first > second else "second")

    return reply


_TOP = {"impact": "all", "root_cause": "both", "rules": "kept"} | {
    "faithful": "faithful",
    "answers": "fully",
    "supported": "all",
    "concise": "concise",
}


@functools.cache
def _incident_tasks() -> dict[str, Any]:
    from redraft.scenarios.builtin.incident import IncidentSummary

    return {task.prompt: task for task in IncidentSummary().tasks(seed=0)}


def _incident_levels(task_text: str, candidate: str) -> dict[str, str]:
    from redraft.scenarios.builtin._incident_logs import SERVICES, read_log
    from redraft.scenarios.builtin._incident_rules import read_reply
    from redraft.scenarios.builtin.incident import IncidentSummary, fact_errors

    task = _incident_tasks()[task_text]
    services = set(read_log(task.reference["log"]).services) | set(SERVICES)
    start, end, failed, service, code = (e is None for e in fact_errors(read_reply(candidate), task.gold, services))
    kept = all(c.passed for c in IncidentSummary().check(task, candidate))
    impact = ("none", "one", "two", "all")[start + end + failed]
    cause = ("neither", "one", "both")[service + code]
    return {"impact": impact, "root_cause": cause, "rules": "kept" if kept else "broken"}


incident_faithful = _by_levels(_incident_levels, {"impact": 3, "root_cause": 2, "rules": 1})
"""Grades an incident summary by the incident's rubric as the program grade would: it knows the task's gold (it
finds the task by its prompt among seed 0's) and names, per criterion, the level its items right call for."""


def _citing_levels(task_text: str, candidate: str) -> dict[str, str]:
    top = "[S" in candidate
    return {
        "faithful": "faithful" if top else "unfaithful",
        "answers": "fully" if top else "no",
        "supported": "all" if top else "none",
        "concise": "concise" if top else "rambling",
    }


cited_by_support = _by_levels(_citing_levels, {"faithful": 3, "answers": 2, "supported": 2, "concise": 1})
"""Grades a cited answer by whether it cites anything at all: every top level when it does, every bottom one
when it does not (a judge built to agree with a label that says "it cites something")."""


@functools.cache
def _cited_cases() -> dict[str, Any]:
    from redraft.scenarios.builtin._cited_documents import make_case
    from redraft.scenarios.builtin.cited_answer import SIZE, CitedAnswer

    tasks = CitedAnswer().tasks(seed=0)
    return {task.prompt: make_case(f"0:{index}", index % 3 + 1) for index, task in enumerate(tasks) if index < SIZE}


def _reading_levels(task_text: str, candidate: str) -> dict[str, str]:
    from redraft.scenarios.builtin._citations import read_claims, words

    case = _cited_cases()[task_text]
    claims = read_claims(candidate)
    not_said = any(c.not_said for c in claims)
    cited = {i for c in claims for i in c.cited}
    support, found = set(case.support), cited & set(case.support)
    others = {n for n, s in enumerate(case.sentences, start=1) if case.subject not in s}
    if not case.support:  # the document does not say
        answers = "fully" if not_said and not cited else "no"
    else:
        answers = "no" if not_said or not found else "fully" if found == support else "partly"
    faithful = "unfaithful" if (not_said and case.support) or (cited & others) else "faithful"
    if not_said and not case.support:
        supported = "all"
    else:
        supported = "none" if not found else "all" if cited <= support else "some"
    count = len(words(candidate))
    concise = "concise" if count <= 12 * max(len(case.support), 1) + 6 else "padded" if count <= 60 else "rambling"
    return {"faithful": faithful, "answers": answers, "supported": supported, "concise": concise}


cited_reader = _by_levels(_reading_levels, {"faithful": 3, "answers": 2, "supported": 2, "concise": 1})
"""Grades a cited answer as a careful reader with the document's key would: it finds the task's case by its
prompt among seed 0's and knows which sentences answer the question (`Case.support`). An answer is faithful
unless it cites a sentence that does not name the subject asked about, or says the document does not say when
it does; it answers fully when it cites every answering sentence (or rightly says the document does not say),
partly when some; it is supported when everything it cites answers; it is concise within 12 words an answering
sentence (plus 6). A program standing in for a larger judge: it reads citations, not the answer's words."""


def answers_seven(request: ChatRequest) -> str:
    """A drafter (and critic) for arithmetic runs whose grades are the judge's: every answer is 7, the first
    criterion's pass when the task's answer is 7."""
    return "3 + 4 = 7\nAnswer: 7"


def openai_body_judge(body: dict[str, Any]) -> str:
    """A judge on the suite's fake OpenAI server (``reply_for``, online or in a batch line): an answer is right
    when it holds ``Answer:``; of two, the one that does, or a tie."""
    schema = body["response_format"]["json_schema"]["schema"]
    if schema.get("title") != "grade":
        first, second = ("Answer:" in text for text in fenced(body["messages"][-1]["content"])[1:3])
        return _pair("tie" if first == second else "first" if first else "second")
    names = criteria_of(schema)
    level = "good" if "Answer:" in fenced(body["messages"][-1]["content"])[2] else "bad"
    return json.dumps({"criteria": [{"criterion": c, "level": level, "reason": "because"} for c in names]})


def _sum_is_right(task: str, text: str) -> bool:
    """Whether ``text``'s answer line is ``a + 1`` for a prompt asking "what is a plus 1?" (the report runs')."""
    import re

    asked = re.search(r"what is (\d+) plus 1", task)
    said = re.search(r"Answer:\s*(-?\d+)", text)
    return bool(asked and said and int(said.group(1)) == int(asked.group(1)) + 1)


def arithmetic_faithful(request: ChatRequest) -> str:
    """Grades the report runs' arithmetic answers as their program grade does (it reads the sum off the prompt),
    and picks the right one of two whatever the order."""
    texts = fenced(request.messages[-1].content)
    if (request.json_schema or {}).get("title") == "grade":
        return _grade(request, _sum_is_right(texts[0], texts[2]))
    a, b = _sum_is_right(texts[0], texts[1]), _sum_is_right(texts[0], texts[2])
    return _pair("tie" if a == b else "first" if a else "second")


lenient = _judge(lambda text: True, lambda a, b: "tie")
"""Passes every answer and ties every pair: it agrees with labels only as often as they say pass."""


REWORDED = "Put another way:"
"""What `rewords` begins every description it rewrites with."""


def rewords(request: ChatRequest) -> str:
    """A rewording model: every criterion's and level's description of the fenced rubric, under its name, begun
    with `REWORDED` (it reads the rubric as `redraft.judging.judge.rubric_text` lays it out)."""
    return rewording_of(request.messages[-1].content)


def rewording_of(prompt: str) -> str:
    """`rewords`' reply to a rewording prompt (also the suite's fake server's, given the prompt of its body)."""
    import re

    criteria: list[dict[str, Any]] = []
    for line in fenced(prompt)[0].splitlines():
        if found := re.match(r"- (\S+) \(weight [^)]*\): (.*)", line):
            criteria.append({"name": found[1], "description": f"{REWORDED} {found[2]}", "levels": []})
        elif (found := re.match(r"\s+- (\S+): (.*)", line)) and criteria:
            criteria[-1]["levels"].append({"name": found[1], "description": f"{REWORDED} {found[2]}"})
    return json.dumps({"criteria": criteria})


def swayed_by_words(request: ChatRequest) -> str:
    """`faithful`, except that a rubric in `rewords`' words makes it fail every answer: it reads the rubric's
    words, not what they mean."""
    if (request.json_schema or {}).get("title") == "grade" and REWORDED in fenced(request.messages[-1].content)[1]:
        return _grade(request, False)
    return faithful(request)
