"""``tune.jsonl`` read record by record: each kind of damage costs the damaged line only, moved beside the journal.

How a resumed search behaves over a damaged journal (what it does again): test_search.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from redraft.protocols.messages import Usage
from redraft.tuning._journal import JOURNAL, Evaluation, PromptCandidate, TuneJournal


def candidate(n: int) -> PromptCandidate:
    return PromptCandidate(
        id=f"c{n}", parent=None, iteration=None, section=None, reason="", entries={}, file=f"prompts/c{n}.toml"
    )


def evaluation(name: str) -> Evaluation:
    return Evaluation(
        candidate=name, on="validation", figures={"t": 1.0}, feedback={"t": 1.0}, graded=True, usage=Usage(), run="r"
    )


def journal_of(root: Path, tune: str | None = "tune-a") -> list[bytes]:
    """A journal of three records; its lines."""
    root.mkdir(exist_ok=True)
    journal = TuneJournal(root, tune)
    for record in (candidate(0), evaluation("c0"), candidate(1)):
        journal.add(record)
    return (root / JOURNAL).read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (b'{"type":"evaluation","candidate":"c0","on":"val\n', "unreadable"),
        (b'{"type":"evaluation","candidate":3,"on":"validation"}\n', "wrong shape"),
        (b'{"type":"no such record"}\n', "wrong shape"),
        (b"[1, 2]\n", "wrong shape"),
    ],
)
def test_a_damaged_middle_line_is_set_aside_and_the_records_after_it_kept(tmp_path: Path, bad: bytes, why: str) -> None:
    lines = journal_of(tmp_path)
    (tmp_path / JOURNAL).write_bytes(b"".join([lines[0], bad, *lines[1:]]))
    journal = TuneJournal(tmp_path, "tune-a")
    assert sorted(journal.candidates) == ["c0", "c1"] and list(journal.evaluations) == [("c0", "validation")]
    assert (tmp_path / f"{JOURNAL}.damaged").read_bytes() == bad
    said = journal.recovery.line()
    assert said is not None and said.startswith(
        f"tune.jsonl: kept 3, set aside 1 line: line 2 (byte {len(lines[0])}) {why}"
    )
    assert (tmp_path / JOURNAL).read_bytes() == b"".join(lines)  # the journal holds its records, and only them


def test_a_journal_copied_from_another_tune_is_set_aside_whole(tmp_path: Path) -> None:
    lines = journal_of(tmp_path / "other", tune="tune-b")
    (tmp_path / JOURNAL).write_bytes(b"".join(lines))
    journal = TuneJournal(tmp_path, "tune-a")
    assert journal.candidates == {} and journal.evaluations == {}
    said = journal.recovery.line()
    assert said is not None and "kept 0, set aside 3 lines" in said and "another run: tune tune-b" in said
    assert (tmp_path / f"{JOURNAL}.damaged").read_bytes() == b"".join(lines)
    journal.add(candidate(0))
    assert TuneJournal(tmp_path, "tune-a").candidates["c0"].tune == "tune-a"


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_deleted_or_emptied_journal_starts_over_with_nothing_set_aside(tmp_path: Path, how: str) -> None:
    journal_of(tmp_path)
    if how == "deleted":
        (tmp_path / JOURNAL).unlink()
    else:
        (tmp_path / JOURNAL).write_bytes(b"")
    journal = TuneJournal(tmp_path, "tune-a")
    assert journal.candidates == {} and journal.recovery.line() is None
    assert not (tmp_path / f"{JOURNAL}.damaged").exists()
    journal.add(candidate(0))
    assert list(TuneJournal(tmp_path, "tune-a").candidates) == ["c0"]


def test_an_add_after_another_writer_was_killed_mid_line_is_a_whole_record(tmp_path: Path) -> None:
    journal = TuneJournal(tmp_path, "tune-a")
    journal.add(candidate(0))
    torn = b'{"type":"candidate","tune":"tune-a","id":"c'
    with open(tmp_path / JOURNAL, "ab") as f:
        f.write(torn)
    journal.add(candidate(1))
    again = TuneJournal(tmp_path, "tune-a")
    assert sorted(again.candidates) == ["c0", "c1"] and again.recovery.line() is None
    assert (tmp_path / f"{JOURNAL}.damaged").read_bytes() == torn


def test_records_of_an_older_journal_without_a_tune_id_are_taken(tmp_path: Path) -> None:
    journal_of(tmp_path, tune=None)
    journal = TuneJournal(tmp_path, "tune-a")
    assert sorted(journal.candidates) == ["c0", "c1"] and journal.recovery.line() is None
