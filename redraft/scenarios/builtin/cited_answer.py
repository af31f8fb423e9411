"""Answers from a given document, with citations: the rules as feedback, the grade a judge's by a rubric alone.

Feedback (`check`) is one exact check per rule that a program can keep
(`redraft.scenarios.builtin._citations`), from the reply and the task's ``reference`` (the document's
sentences, the word limit): what a user with the document can tell. Whether the answer is faithful to what it
cites, answers the question, is supported by its citations and is concise no program here can tell: there is
no program grade (`grade` is None, the task holds no gold), only the scenario's rubric (`rubric`,
``data/cited_answer-rubric.toml``), for a judge after the loop. An answer that keeps every rule can still be
wrong, and "The document does not say." keeps them all: the feedback steers, the rubric judges.

Invariants: the task list depends only on the seed; `check` never raises for any text; the task carries no
answer and nothing that grades one.

See docs/architecture.md, section "Cited answers: the tasks".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios import Scenario, scenario
from redraft.scenarios.builtin._citations import (
    NOT_SAID,
    check_cited,
    check_ids,
    check_length,
    check_quotes,
    read_claims,
)
from redraft.scenarios.builtin._cited_documents import make_case
from redraft.scenarios.builtin._rubrics import shipped_rubric

SIZE = 120
MAX_WORDS = 60
"""The word limit a task's ``reference`` holds (a task file may set its own)."""


def rules_text(count: int, max_words: int) -> str:
    """The rules as the prompt states them, a numbered list."""
    return "\n".join(
        [
            f"1. At most {max_words} words, the citations not counted.",
            "2. End every sentence of the answer with the ids of the document's sentences that support it, in "
            "square brackets: [S3], or [S2, S5] for several.",
            f"3. Cite only ids the document has (S1 to S{count}).",
            "4. A quotation (text in double quotes) is copied word for word from a sentence that its own sentence "
            "cites.",
            f"5. If the document does not answer the question, answer exactly: {NOT_SAID}",
        ]
    )


def prompt_of(sentences: list[str], question: str, max_words: int) -> str:
    """A task's prompt: the document in a fence, one sentence a line after its id; the question; the rules."""
    document = "\n".join(f"[S{n}] {sentence}" for n, sentence in enumerate(sentences, start=1))
    return (
        "Answer the question from the document below, and from nothing else.\n\n"
        f"The document, one sentence a line after its id:\n\n```text\n{document}\n```\n\n"
        f"Question: {question}\n\nKeep every rule:\n{rules_text(len(sentences), max_words)}"
    )


def _sentences(reference: dict[str, Any]) -> list[str]:
    given = reference.get("document")
    return [str(s) for s in given] if isinstance(given, list) else []


@scenario("cited_answer")
class CitedAnswer(Scenario):
    """Answers from a given document with citations: the rules for feedback, a rubric for a judge, no gold."""

    feedback_keys = frozenset({"document", "max_words"})
    check_cost = "instant"  # a few regular expressions over the reply and the document

    def tasks(self, *, seed: int) -> Iterator[Task]:
        for index in range(SIZE):
            case = make_case(f"{seed}:{index}", index % 3 + 1)
            sentences = list(case.sentences)
            yield Task(
                task_id=f"cited-{index:03d}",
                scenario=self.name,
                prompt=prompt_of(sentences, case.question, MAX_WORDS),
                reference={"document": sentences, "max_words": MAX_WORDS},
            )

    def system_prompt(self) -> str:
        return (
            "You answer questions from one given document, and from nothing else. State only what its sentences "
            "say, end every sentence you write with the ids of the sentences that support it, and keep every "
            "numbered rule of the task exactly. Answer with the answer only."
        )

    def answer(self, text: str) -> str | None:
        """The sentences cited (or that the document does not say), for agreement between samples."""
        claims = read_claims(text)
        if any(c.not_said for c in claims):
            return "not said"
        cited = sorted({i for c in claims for i in c.cited})
        return " ".join(f"S{i}" for i in cited) or None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        sentences = _sentences(task.reference)
        max_words = task.reference.get("max_words")
        claims = read_claims(text)
        return [
            check_length(text, max_words if isinstance(max_words, int) else MAX_WORDS),
            check_cited(claims),
            check_ids(claims, len(sentences)),
            check_quotes(claims, sentences),
        ]

    def rubric(self) -> dict[str, Any]:
        return shipped_rubric("cited_answer")
