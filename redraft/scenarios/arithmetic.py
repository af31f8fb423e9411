"""Seeded multi-step word problems with exact integer answers.

Each problem is a start quantity followed by two gains or losses; the gold answer is computed exactly, and the task
list depends only on the seed. The verifier extracts the candidate's final
number (``Answer: N``, else the last integer) and compares it; its feedback says
the answer is wrong without revealing the right one.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios.base import Scenario, scenario

SIZE = 1000
STEPS = 2
_NAMES = ["Mia", "Tom", "Ava", "Leo", "Zoe", "Sam", "Ivy", "Max", "Nia", "Ben"]
_ITEMS = ["apples", "marbles", "stickers", "books", "coins", "pencils", "shells", "cards"]
_ANSWER = re.compile(r"answer\s*(?:is)?\s*[:=]?\s*[*'\"]*\s*(-?\d[\d,]*)", re.IGNORECASE)
_INTEGER = re.compile(r"-?\d[\d,]*")


def _problem(rng: random.Random) -> tuple[str, int]:
    """Two steps of gains and losses with small numbers.

    Sized for the embedded 135M model, which gets such a problem right in roughly
    one sample of twenty: hard enough that one draft usually fails, easy enough
    that the loop can find a right one.
    """
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    total = rng.randint(3, 12)
    sentences = [f"{name} has {total} {item}."]
    for _ in range(STEPS):
        if total > 2 and rng.random() < 0.5:
            n = rng.randint(1, total - 1)
            sentences.append(f"Then {name} gives away {n} {item}.")
            total -= n
        else:
            n = rng.randint(1, 10)
            sentences.append(f"Then {name} gets {n} more {item}.")
            total += n
    sentences.append(f"How many {item} does {name} have now?")
    return " ".join(sentences), total


def extract_answer(text: str) -> int | None:
    """The candidate's final integer: the last ``Answer: N``, else the last integer in the text."""
    marked = _ANSWER.findall(text)
    found = marked[-1] if marked else (_INTEGER.findall(text) or [None])[-1]
    if found is None:
        return None
    try:
        return int(found.replace(",", ""))
    except ValueError:
        return None


@scenario("arithmetic")
class Arithmetic(Scenario):
    """Multi-step word problems; exact integer answers."""

    def tasks(self, *, seed: int) -> Iterator[Task]:
        rng = random.Random(seed)
        for i in range(SIZE):
            prompt, answer = _problem(rng)
            yield Task(task_id=f"arithmetic-{i:04d}", scenario=self.name, prompt=prompt, reference={"answer": answer})

    def system_prompt(self) -> str:
        return (
            "Solve the word problem. Work it out step by step in a few short lines, "
            "then end with a last line of the form 'Answer: <integer>'."
        )

    def answer(self, text: str) -> str | None:
        value = extract_answer(text)
        return None if value is None else str(value)

    def check(self, task: Task, text: str) -> list[CheckResult]:
        gold = int(task.reference["answer"])
        value = extract_answer(text)
        if value is None:
            detail = "no final answer found; end with a line 'Answer: <integer>'"
            return [CheckResult(name="final_answer", passed=False, score=0.0, detail=detail)]
        if value != gold:
            detail = f"the final answer {value} is wrong; redo each step's arithmetic"
            return [CheckResult(name="final_answer", passed=False, score=0.0, detail=detail)]
        return [CheckResult(name="final_answer", passed=True, score=1.0, detail=f"final answer {value} is correct")]
