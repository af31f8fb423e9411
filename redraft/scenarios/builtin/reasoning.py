"""The ``reasoning_gym:NAME`` scenarios: any data set of the `reasoning-gym` package, scored by its own checker.

`reasoning-gym` is an optional extra (``pip install 'redraft[reasoning]'``),
imported only when such a scenario is built. A task's gold holds where its entry
comes from (data set, seed, index), not the entry itself: the grader rebuilds the
entry from the same seeded generator, so metadata of any type survive.

Feedback (`check`) is only what a user has without the answer: a final answer is
given, in the form asked for (between ``<answer>`` tags). The data set's own
``score_answer`` knows the answer, so it is the grade (`grade`), held out.

Invariants: the tasks depend only on the seed; `check` and `grade` never raise
for bad text.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterator
from typing import Any

from redraft.errors import UserError
from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios import Scenario, scenario

SIZE = 200
"""Tasks per data set (use ``--limit`` for fewer)."""

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_ANSWER_LINE = re.compile(r"^\s*(?:final\s+)?answer\s*[:=]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def _gym() -> Any:
    try:
        import reasoning_gym
    except ImportError:
        raise UserError(
            "reasoning_gym:NAME scenarios need the optional package reasoning-gym: pip install 'redraft[reasoning]'"
        ) from None
    return reasoning_gym


def dataset_names() -> list[str]:
    """Every data set name reasoning-gym knows."""
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


@functools.cache
def _dataset(name: str, seed: int) -> Any:
    return _gym().create_dataset(name, size=SIZE, seed=seed)


def extract_answer(text: str) -> str | None:
    """The final answer: the last ``<answer>...</answer>``, else the last ``Answer: ...`` line, else None."""
    tagged = _ANSWER_TAG.findall(text)
    if tagged:
        return str(tagged[-1]).strip()
    lines = _ANSWER_LINE.findall(text)
    return str(lines[-1]).strip() if lines else None


@scenario("reasoning_gym:NAME")
class ReasoningGym(Scenario):
    """A reasoning-gym data set (``reasoning_gym:leg_counting``, ...); its own ``score_answer`` is the check."""

    draft_tokens = 256  # worked reasoning, then the answer

    def __init__(self, dataset: str) -> None:
        _gym()
        known = dataset_names()
        if dataset not in known:
            close = difflib.get_close_matches(dataset, known, n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise UserError(
                f"unknown reasoning-gym data set {dataset!r} ({hint}known: {', '.join(known[:12])}, "
                f"... {len(known)} in all; list them with python -c 'import reasoning_gym.factory as f; "
                "print(sorted(f.DATASETS))')"
            )
        self.dataset = dataset
        self.name = f"reasoning_gym:{dataset}"

    def tasks(self, *, seed: int) -> Iterator[Task]:
        data = _dataset(self.dataset, seed)
        for index in range(len(data)):
            yield Task(
                task_id=f"{self.dataset}-{index:04d}",
                scenario=self.name,
                prompt=str(data[index]["question"]),
                gold={"dataset": self.dataset, "seed": seed, "index": index},
            )

    def system_prompt(self) -> str:
        return (
            "Solve the problem step by step in a few short lines. Then give only the final answer, in the exact "
            "form the question asks for, between <answer> and </answer> tags."
        )

    def answer(self, text: str) -> str | None:
        found = extract_answer(text)
        return " ".join(found.split()) if found else None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        found = extract_answer(text)
        if found is None:
            detail = "no final answer found; end with the answer between <answer> and </answer> tags"
            return [CheckResult(name="answer_given", passed=False, score=0.0, detail=detail)]
        if not re.search(r"\w", found):
            detail = "the <answer> tags hold no answer (no letter or digit); put the final answer between them"
            return [CheckResult(name="answer_given", passed=False, score=0.0, detail=detail)]
        return [CheckResult(name="answer_given", passed=True, score=1.0, detail="a final answer is given")]

    def grade(self, task: Task, text: str) -> CheckResult | None:
        gold = task.gold
        if not {"dataset", "seed", "index"} <= set(gold):
            return None
        data = _dataset(str(gold["dataset"]), int(gold["seed"]))
        entry = data[int(gold["index"])]
        found = extract_answer(text)
        if found is None:
            return CheckResult(name="score_answer", passed=False, score=0.0, detail="no final answer")
        try:
            score = float(data.score_answer(found, entry))
        except Exception as exc:  # the data set's checker choked on this answer: it cannot be right
            detail = f"the answer {found[:80]!r} could not be scored ({type(exc).__name__})"
            return CheckResult(name="score_answer", passed=False, score=0.0, detail=detail)
        score = min(max(score, 0.0), 1.0)
        detail = f"score_answer gave {score:.2f} for {found[:80]!r}; the gold answer is {str(entry['answer'])[:80]!r}"
        return CheckResult(name="score_answer", passed=score >= 1.0, score=score, detail=detail)
