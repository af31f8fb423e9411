"""The one rule for JSON-lines journals: a damaged line is set aside (its bytes moved beside the file), the lines
after it are kept, and an append never glues a record to a torn tail."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from redraft.jsonlines import Refused, append, damaged_path, records, recover, scan


class Entry(msgspec.Struct, frozen=True):
    n: int
    run: str = "mine"


_decoder = msgspec.json.Decoder(Entry)


def decode(data: bytes) -> Entry:
    entry = _decoder.decode(data)
    if entry.run != "mine":
        raise Refused("another run", f"run {entry.run!r}")
    return entry


def lines(*ns: int) -> list[bytes]:
    return [msgspec.json.encode(Entry(n)) + b"\n" for n in ns]


def test_an_undamaged_journal_is_read_whole_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"".join(lines(1, 2, 3)))
    before = path.stat()
    found, recovery = recover(path, decode)
    assert [e.n for e in found] == [1, 2, 3] and recovery.line() is None
    assert path.stat().st_ino == before.st_ino and not damaged_path(path).exists()


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (b'{"n": 4, oops}\n', "unreadable"),
        (b'{"n": "four"}\n', "wrong shape"),
        (b'["n", 4]\n', "wrong shape"),
        (b'{"n": 4, "run": "theirs"}\n', "another run"),
    ],
)
def test_a_damaged_middle_line_is_set_aside_and_the_lines_after_it_kept(tmp_path: Path, bad: bytes, why: str) -> None:
    path = tmp_path / "j.jsonl"
    good = lines(1, 2, 3, 5, 6)
    path.write_bytes(b"".join([*good[:3], bad, *good[3:]]))
    offset = sum(map(len, good[:3]))
    found, recovery = recover(path, decode)
    assert [e.n for e in found] == [1, 2, 3, 5, 6]
    assert damaged_path(path).read_bytes() == bad
    assert path.read_bytes() == b"".join(good)
    said = recovery.line()
    assert said is not None and "\n" not in said
    assert said.startswith(f"j.jsonl: kept 5, set aside 1 line: line 4 (byte {offset}) {why}")
    assert said.endswith("(moved to j.jsonl.damaged)")
    if why == "wrong shape":
        assert "$.n" in said or "array" in said  # msgspec names what is wrong


def test_a_torn_tail_is_set_aside_and_an_append_after_it_is_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "j.jsonl"
    torn = b'{"n": 3, "ru'
    path.write_bytes(b"".join(lines(1, 2)) + torn)
    assert [e.n for e in records(path, decode)] == [1, 2]  # a reader skips it and writes nothing
    assert path.read_bytes().endswith(torn)
    cut = append(path, lines(4)[0])
    assert cut is not None and cut.data == torn and cut.why == "torn"
    assert caplog.messages == [
        f"j.jsonl: set aside the last line (byte {cut.offset}) torn before appending (moved to j.jsonl.damaged)"
    ]
    assert damaged_path(path).read_bytes() == torn
    found, recovery = recover(path, decode)
    assert [e.n for e in found] == [1, 2, 4] and recovery.line() is None


def test_a_journal_that_is_all_torn_is_moved_aside_whole_by_an_append(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"x" * 70_000)  # longer than one block read from the end
    append(path, lines(1)[0])
    assert path.read_bytes() == lines(1)[0] and damaged_path(path).read_bytes() == b"x" * 70_000


def test_many_damaged_lines_are_counted_and_the_first_few_named_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"".join([lines(1)[0], *(b"nope\n" for _ in range(5)), lines(2)[0], b"\n"]))
    found, recovery = recover(path, decode)
    said = recovery.line()
    assert [e.n for e in found] == [1, 2] and said is not None
    first = len(lines(1)[0])
    named = f"line 2 (byte {first}) unreadable; line 3 (byte {first + 5}) unreadable"
    assert said.startswith(f"j.jsonl: kept 2, set aside 5 lines: {named}")
    assert "; and 2 more (moved" in said
    assert damaged_path(path).read_bytes() == b"nope\n" * 5
    assert path.read_bytes() == b"".join(lines(1, 2))  # the blank line held nothing


def test_a_missing_journal_has_no_records_and_an_append_makes_it(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    assert recover(path, decode) == ([], recover(path, decode)[1]) and list(scan(path, decode)) == []
    assert append(path, lines(7)[0], sync=True) is None
    assert [e.n for e in records(path, decode)] == [7]


def test_a_second_recovery_adds_to_the_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"one\n" + lines(1)[0])
    recover(path, decode)
    path.write_bytes(path.read_bytes() + b"two\n")
    recover(path, decode)
    assert damaged_path(path).read_bytes() == b"one\ntwo\n"


def test_refused_round_trips_through_pickle() -> None:
    import pickle

    again = pickle.loads(pickle.dumps(Refused("another run", "run 'x'")))
    assert (again.why, again.detail) == ("another run", "run 'x'")


def test_a_line_nested_deeper_than_a_decoder_goes_is_set_aside_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    path.write_bytes(b"".join([lines(1)[0], deep, lines(2)[0]]))
    untyped = list(records(path, msgspec.json.decode))  # an untyped decoder recurses: still no exception
    assert untyped == [{"n": 1, "run": "mine"}, {"n": 2, "run": "mine"}]
    found, recovery = recover(path, msgspec.json.decode)
    assert len(found) == 2 and damaged_path(path).read_bytes() == deep
    assert recovery.line() is not None and "unreadable: nested too deep" in recovery.line()  # type: ignore[operator]
