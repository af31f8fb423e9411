"""People's judgements in ``labels.jsonl``: appended one line at a time by any number of processes, beside a run
being written and without its lock, touching no other file; read back record by record, the latest label per task
winning, a label on an answer that has since changed not counting."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from redraft.errors import JudgementError, UserError
from redraft.rundir import (
    LABELS,
    Label,
    Preference,
    RunReader,
    RunStore,
    answer_digest,
    append_label,
    append_preference,
    read_judgements,
)
from redraft.rundir.lock import LOCK
from tests.unit.rundir.test_damaged_rundir import manifest, write

ANSWER = answer_digest("42")
OTHER = answer_digest("41")


def label(task_id: str = "t1", verdict: str = "pass", digest: str = ANSWER, **fields: object) -> Label:
    return Label(task_id=task_id, reviewer="ana", verdict=verdict, answer_digest=digest, **fields)  # type: ignore[arg-type]


def clock() -> float:
    return 1_800_000_000.0


def test_a_label_and_a_preference_are_read_back_as_written(tmp_path: Path) -> None:
    given = label(score=0.75, comment="right, but terse", shown={"page": "queue", "seed": "7"})
    written = append_label(tmp_path, given, clock=clock)
    preference = Preference("t1", "bo", ("greedy", "refine"), (OTHER, ANSWER), "B")
    kept = append_preference(tmp_path, preference, clock=clock)
    found = read_judgements(tmp_path)
    assert found.labels == [written] and found.preferences == [kept] and found.set_aside == 0
    assert written.at == clock() and written.score == 0.75 and kept.winner == "refine"
    lines = [json.loads(line) for line in (tmp_path / LABELS).read_text().splitlines()]
    assert [(line["kind"], line["v"]) for line in lines] == [("label", 1), ("preference", 1)]


def test_a_time_given_is_kept_and_a_tie_has_no_winner(tmp_path: Path) -> None:
    assert append_label(tmp_path, label(at=12.5), clock=clock).at == 12.5
    tie = Preference("t1", "bo", ("a", "b"), (ANSWER, OTHER), "tie")
    assert tie.winner is None and Preference("t1", "bo", ("a", "b"), (ANSWER, OTHER), "A").winner == "a"


@pytest.mark.parametrize(
    "fields",
    [
        {"reviewer": ""},
        {"reviewer": "  "},
        {"reviewer": "r" * 201},
        {"comment": "c" * 10_001},
        {"score": 1.5},
        {"score": -0.1},
        {"score": float("nan")},
        {"verdict": "maybe"},
        {"answer_digest": "abc"},
        {"task_id": ""},
        {"at": -1.0},
    ],
    ids=lambda fields: next(iter(fields)) + "=" + repr(next(iter(fields.values())))[:12],
)
def test_a_label_that_cannot_be_recorded_is_refused_as_it_is_made(fields: dict[str, object]) -> None:
    given: dict[str, object] = {"task_id": "t1", "reviewer": "ana", "verdict": "pass", "answer_digest": ANSWER}
    with pytest.raises(JudgementError) as raised:
        Label(**(given | fields))  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, UserError)


def test_the_longest_reviewer_and_comment_allowed_are_taken() -> None:
    made = Label("t1", "r" * 200, "fail", ANSWER, score=0.0, comment="c" * 10_000)
    assert len(made.reviewer) == 200 and len(made.comment) == 10_000


@pytest.mark.parametrize(
    ("shown", "digests", "choice"),
    [
        (("a", "a"), (ANSWER, OTHER), "A"),
        (("a", ""), (ANSWER, OTHER), "A"),
        (("a", "b"), (ANSWER, "x"), "A"),
        (("a", "b"), (ANSWER, OTHER), "C"),
        (("a", "b", "c"), (ANSWER, OTHER), "A"),
    ],
)
def test_a_preference_that_cannot_be_recorded_is_refused(
    shown: tuple[str, ...], digests: tuple[str, ...], choice: str
) -> None:
    with pytest.raises(ValueError):
        Preference("t1", "bo", shown, digests, choice)  # type: ignore[arg-type]


def test_text_is_made_plain_so_a_lone_surrogate_costs_a_character_not_the_label(tmp_path: Path) -> None:
    written = append_label(tmp_path, label(comment="bad \ud800 char", shown={"page": "t\udfff"}), clock=clock)
    assert written.comment == "bad \ufffd char" and written.shown == {"page": "t\ufffd"}
    assert read_judgements(tmp_path).labels == [written]
    assert answer_digest("x\ud800") == answer_digest("x\ufffd")


def test_a_missing_file_is_no_judgement_and_a_missing_directory_is_refused(tmp_path: Path) -> None:
    found = read_judgements(tmp_path)
    assert (found.labels, found.preferences, found.set_aside) == ([], [], 0)
    with pytest.raises(JudgementError, match="no such directory"):
        append_label(tmp_path / "nowhere", label())


def test_a_label_is_recorded_while_the_run_is_being_written_touching_none_of_its_files(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path, manifest())
    write(store, range(3))
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert LOCK in before  # the run's writer holds the directory
    append_label(tmp_path, label("t1"), clock=clock)
    append_preference(tmp_path, Preference("t2", "bo", ("a", "b"), (ANSWER, OTHER), "A"), clock=clock)
    after = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert set(after) == set(before) | {LABELS}
    assert all(after[name] == data for name, data in before.items())
    write(store, range(3, 5))  # the run goes on writing, and its reader reads it whole
    store.finish(0.0)
    assert [entry.task_id for entry in RunReader(tmp_path).entries()] == [f"t{i}" for i in range(5)]
    assert len(read_judgements(tmp_path).labels) == 1


def test_a_torn_tail_is_sealed_by_the_next_append_and_set_aside_without_another_file(tmp_path: Path) -> None:
    first = append_label(tmp_path, label("t1"), clock=clock)
    path = tmp_path / LABELS
    with open(path, "ab") as out:
        out.write(b'{"kind":"label","task_id":"t2","revi')  # a writer killed mid-line
    assert read_judgements(tmp_path).set_aside == 1
    second = append_label(tmp_path, label("t3"), clock=clock)
    found = read_judgements(tmp_path)
    assert found.labels == [first, second] and found.set_aside == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [LABELS]


def test_a_damaged_line_costs_that_line_only(tmp_path: Path) -> None:
    append_label(tmp_path, label("t1"), clock=clock)
    path = tmp_path / LABELS
    with open(path, "ab") as out:
        out.write(b"not json\n")
        out.write(b'{"kind":"ranking","v":2,"task_id":"t1","reviewer":"x","at":1}\n')  # a kind this version lacks
        out.write(b'{"kind":"label","task_id":"t1","reviewer":"","verdict":"pass","answer_digest":"' + ANSWER.encode())
        out.write(b'","at":1}\n')  # no reviewer
        out.write(b'{"kind":"label","v":2,"task_id":"t9","reviewer":"x","verdict":"fail","answer_digest":"')
        out.write(ANSWER.encode() + b'","at":3,"weight":2}\n')  # a later version's field, ignored
    append_label(tmp_path, label("t2"), clock=clock)
    found = read_judgements(tmp_path)
    assert [made.task_id for made in found.labels] == ["t1", "t9", "t2"] and found.set_aside == 3


def test_the_latest_label_per_task_wins_and_only_labels_on_the_current_answer_count(tmp_path: Path) -> None:
    append_label(tmp_path, label("t1", "fail"), clock=clock)
    append_label(tmp_path, label("t1", "pass"), clock=clock)
    append_label(tmp_path, label("t2", "pass", digest=OTHER), clock=clock)  # judged "41"; the answer is now "42"
    append_label(tmp_path, label("t3", "pass"), clock=clock)
    append_label(tmp_path, label("t3", "fail", digest=OTHER), clock=clock)  # a stale page's label: not current
    found = read_judgements(tmp_path)
    assert len(found.labels) == 5  # history kept
    latest = found.latest_labels()
    assert {t: (x.verdict, x.answer_digest == ANSWER) for t, x in latest.items()} == {
        "t1": ("pass", True),
        "t2": ("pass", False),
        "t3": ("fail", False),
    }
    current = found.current({"t1": "42", "t2": "42", "t3": "42", "t4": "42"})
    assert {t: x.verdict for t, x in current.items()} == {"t1": "pass", "t3": "pass"}


def test_the_latest_preference_per_task_and_pair_wins_whichever_order_it_was_shown_in(tmp_path: Path) -> None:
    append_preference(tmp_path, Preference("t1", "bo", ("a", "b"), (ANSWER, OTHER), "A"), clock=clock)
    append_preference(tmp_path, Preference("t1", "bo", ("b", "a"), (OTHER, ANSWER), "A"), clock=clock)
    append_preference(tmp_path, Preference("t1", "bo", ("a", "c"), (ANSWER, OTHER), "tie"), clock=clock)
    latest = read_judgements(tmp_path).latest_preferences()
    assert {key: p.winner for key, p in latest.items()} == {("t1", "a", "b"): "b", ("t1", "a", "c"): None}


def _appender(directory: str, reviewer: str, count: int) -> None:
    for i in range(count):
        made = Label(f"t{i}", reviewer, "pass", ANSWER, comment="x" * (i * 97 % 5000))
        append_label(Path(directory), made)


def test_two_processes_appending_at_once_never_cut_each_other_s_lines(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_appender, args=(str(tmp_path), who, 60)) for who in ("ana", "bo")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert [worker.exitcode for worker in workers] == [0, 0]
    found = read_judgements(tmp_path)
    assert found.set_aside == 0
    for who in ("ana", "bo"):
        assert [made.task_id for made in found.labels if made.reviewer == who] == [f"t{i}" for i in range(60)]
    assert os.listdir(tmp_path) == [LABELS]
