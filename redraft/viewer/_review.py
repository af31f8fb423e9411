"""People's judgements, read and written through the one module that keeps them (`redraft.rundir.labels`):
the label queue (a run's unlabelled tasks in a seeded random order), coverage, the human verdict of each
task, and the blind pairwise queue of a comparison (two lanes' answers to one task, their order drawn per task,
their names hidden until the choice is made).

A label holds the digest of the answer it judged: an answer changed since (a resumed run redid the task) is
unlabelled again, its old label kept in the history.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from redraft.rundir import (
    LABELS,
    Judgements,
    Label,
    Preference,
    answer_digest,
    append_label,
    append_preference,
    read_judgements,
)
from redraft.viewer._index import Row

Verdict = Literal["pass", "fail"]
Choice = Literal["A", "B", "tie"]
CARD_NEEDS = 50
"""Labels a judge's card is trusted on at the least (said in the coverage line)."""


def judgements(root: Path) -> Judgements:
    """Every label and choice of ``root``, read record by record."""
    return read_judgements(root)


def has_judgements(root: Path) -> bool:
    return (root / LABELS).is_file()


def current_labels(root: Path, rows: Sequence[Row]) -> dict[str, Label]:
    """Each task's latest label of its current final answer (the `Result`'s ``text``, which a label's digest is of)."""
    judged = read_judgements(root)
    labelled = {label.task_id for label in judged.labels}  # only their answers' digests are made
    return judged.current({row.task_id: row.text for row in rows if row.task_id in labelled})


def human_verdicts(labels: Mapping[str, Label]) -> dict[str, bool]:
    return {task_id: label.verdict == "pass" for task_id, label in labels.items()}


def coverage(labelled: int, tasks: int) -> str:
    need = (
        f"; a judge's card needs {CARD_NEEDS}"
        if labelled < CARD_NEEDS
        else f"; enough for a judge's card ({CARD_NEEDS})"
    )
    return f"{labelled:,} of {tasks:,} labelled{need}"


def queue(rows: Sequence[Row], seed: int) -> list[str]:
    """The run's task ids in the review's order: shuffled by ``seed``, the same for everyone with it."""
    ids = [row.task_id for row in rows]
    random.Random(seed).shuffle(ids)
    return ids


def next_unlabelled(order: Sequence[str], labelled: Mapping[str, object], after: str | None) -> str | None:
    """The first unlabelled task after ``after`` in ``order`` (from the start when None), wrapping round."""
    start = order.index(after) + 1 if after in order else 0
    for task_id in [*order[start:], *order[:start]]:
        if task_id not in labelled and task_id != after:
            return task_id
    return None


def label(root: Path, row: Row, verdict: Verdict, said: Said) -> Label:
    """Append a person's label of ``row``'s final answer to ``root``'s labels, and return it as written.
    `redraft.errors.JudgementError` (a `ValueError`) for a label the labels' rules refuse."""
    made = Label(
        task_id=row.task_id,
        reviewer=said.reviewer,
        verdict=verdict,
        answer_digest=answer_digest(row.text),
        score=said.score,
        comment=said.comment,
        shown=said.shown,
    )
    return append_label(root, made)


@dataclass(frozen=True)
class Said:
    """What a person put in the label form besides the verdict, and which page showed the answer."""

    reviewer: str
    score: float | None = None
    comment: str = ""
    shown: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Pair:
    """One blind comparison: a task, two lanes in the order shown, their answers."""

    task_id: str
    lanes: tuple[str, str]
    texts: tuple[str, str]
    prompt: str = ""


def shown_order(seed: int, task_id: str, lanes: tuple[str, str]) -> tuple[str, str]:
    """The order two lanes are shown in for a task: drawn from the seed and the task, so the page and the post
    that answers it agree without the page saying it."""
    flip = random.Random(f"{seed}:{task_id}").random() < 0.5
    return (lanes[1], lanes[0]) if flip else lanes


def pairs_left(
    a: Mapping[str, Row], b: Mapping[str, Row], lanes: tuple[str, str], judged: Judgements, seed: int, reviewer: str
) -> list[str]:
    """The tasks both lanes answered that ``reviewer`` (anyone, when empty) has not chosen on, in a seeded order."""
    done = {
        p.task_id for p in judged.preferences if set(p.shown) == set(lanes) and (not reviewer or p.reviewer == reviewer)
    }
    ids = [t for t in a if t in b and t not in done and (a[t].text or b[t].text)]  # two empty answers: no choice
    random.Random(seed).shuffle(ids)
    return ids


def prefer(root: Path, pair: Pair, reviewer: str, choice: Choice) -> Preference:
    """Append a person's blind choice between ``pair``'s answers (in the order shown) to ``root``'s labels."""
    made = Preference(
        task_id=pair.task_id,
        reviewer=reviewer,
        shown=pair.lanes,
        digests=(answer_digest(pair.texts[0]), answer_digest(pair.texts[1])),
        choice=choice,
    )
    return append_preference(root, made)


def preference_share(judged: Judgements) -> str:
    """Each lane's share of the pairwise choices it was in (a tie half a win), or '' when none was made."""
    wins: dict[str, float] = {}
    seen: dict[str, int] = {}
    for p in judged.preferences:
        for lane in p.shown:
            seen[lane] = seen.get(lane, 0) + 1
            wins[lane] = wins.get(lane, 0.0) + (0.5 if p.choice == "tie" else float(p.winner == lane))
    return " · ".join(f"{lane} preferred {wins[lane] / n:.0%} of {n}" for lane, n in sorted(seen.items()))
