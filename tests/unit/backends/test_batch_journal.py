"""``batches.jsonl`` read record by record, and a batch paid once when the journal was damaged or deleted: the
collector finds the run's batches in the provider's list (an in-memory batch API here; the real SDKs against the
fake server: test_fake_batch_apis.py; a whole run on Ray: tests/integration/test_batch_run.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from redraft.backends._batch import BatchCollector
from redraft.backends._batch_apis import LineFailure, Listed
from redraft.backends._batch_journal import BatchJournal, BatchRun, recover_journal
from redraft.backends.base import Completion
from redraft.backends.cache import ResponseCache
from redraft.errors import RetryableBackendError
from tests.unit.backends.test_batch import FAST, SPEC, MemoryBatches, request

OTHER = "anthropic:claude-haiku-4-5"
RUN = BatchRun(uid="run-a", since=0.0)
LOST = BatchRun(uid="run-a", since=0.0, journal_lost=True)


def journal_lines(path: Path) -> list[bytes]:
    """A journal of four records over two endpoints (the second batch of SPEC still open); its lines."""
    mine, other = BatchJournal(path, SPEC.spec, RUN.uid), BatchJournal(path, OTHER, RUN.uid)
    mine.submitted("batch_1", ["k1", "k2"], 1.0)
    other.submitted("msgbatch_1", ["a"], 1.5)
    mine.submitted("batch_2", ["k3"], 2.0)
    mine.ended("batch_1")
    return path.read_bytes().splitlines(keepends=True)


DAMAGE = {
    "not json": (b'{"endpoint": "openai:gpt-4o-mini", "subm\n', "unreadable"),
    "a key of the wrong type": (b'{"endpoint":"openai:gpt-4o-mini","submitted":3,"at":1.0,"keys":[]}\n', "wrong shape"),
    "submitted without its keys": (b'{"endpoint":"openai:gpt-4o-mini","submitted":"batch_9"}\n', "wrong shape"),
    "neither submitted nor ended": (b'{"endpoint":"openai:gpt-4o-mini"}\n', "wrong shape"),
    "no endpoint": (b'{"ended":"batch_2"}\n', "wrong shape"),
    "not an object": (b'["batch_2"]\n', "wrong shape"),
    "another run's": (b'{"endpoint":"openai:gpt-4o-mini","ended":"batch_2","run":"run-b"}\n', "another run"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_middle_line_is_skipped_then_set_aside_and_the_lines_after_it_kept(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "batches.jsonl"
    lines = journal_lines(path)
    bad, why = DAMAGE[damage]
    path.write_bytes(b"".join([*lines[:2], bad, *lines[2:]]))
    journal = BatchJournal(path, SPEC.spec, RUN.uid)
    assert journal.open_batches() == {"batch_2": (["k3"], 2.0)}  # a reader never raises, and writes nothing
    assert path.read_bytes().count(bad) == 1
    recovery = recover_journal(path, RUN.uid)
    said = recovery.line()
    offset = len(lines[0]) + len(lines[1])
    assert said == (
        f"batches.jsonl: kept 4, set aside 1 line: line 3 (byte {offset}) {why}"
        + (f": {recovery.set_aside[0].detail}" if recovery.set_aside[0].detail else "")
        + " (moved to batches.jsonl.damaged)"
    )
    assert (tmp_path / "batches.jsonl.damaged").read_bytes() == bad
    assert path.read_bytes() == b"".join(lines)
    assert BatchJournal(path, OTHER, RUN.uid).open_batches() == {"msgbatch_1": (["a"], 1.5)}


def test_a_torn_last_line_is_cut_before_the_next_record_is_appended(tmp_path: Path) -> None:
    path = tmp_path / "batches.jsonl"
    journal_lines(path)
    torn = b'{"endpoint":"openai:gpt-4o-mini","submitted":"batch_3","at":3.0,"keys":["k4",'
    with open(path, "ab") as out:
        out.write(torn)
    journal = BatchJournal(path, SPEC.spec, RUN.uid)
    journal.submitted("batch_4", ["k5"], 4.0)  # not glued to the torn line: both would be unreadable
    assert journal.open_batches() == {"batch_2": (["k3"], 2.0), "batch_4": (["k5"], 4.0)}
    assert (tmp_path / "batches.jsonl.damaged").read_bytes() == torn
    assert recover_journal(path, RUN.uid).line() is None


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_deleted_or_emptied_journal_holds_nothing_and_sets_nothing_aside(tmp_path: Path, how: str) -> None:
    path = tmp_path / "batches.jsonl"
    journal_lines(path)
    if how == "deleted":
        path.unlink()
    else:
        path.write_bytes(b"")
    assert BatchJournal(path, SPEC.spec, RUN.uid).open_batches() == {}
    assert recover_journal(path, RUN.uid).line() is None and not (tmp_path / "batches.jsonl.damaged").exists()


def damage_journal(path: Path, how: str) -> None:
    """What a careless operator or a crash does to the journal of a batch still open."""
    match how:
        case "deleted":
            path.unlink()
        case "emptied":
            path.write_bytes(b"")
        case "torn":  # the driver died while writing the line of the batch it had just sent
            path.write_bytes(path.read_bytes()[:-20])
        case "wrong shape":
            record = json.loads(path.read_bytes())
            path.write_text(json.dumps(record | {"keys": "all of them"}) + "\n")


async def killed_after_sending(api: MemoryBatches, journal: str, texts: list[str], run: BatchRun) -> None:
    """A collector that sends ``texts`` as one batch, then dies with its driver (the batch stays out)."""
    first = BatchCollector(SPEC, journal, FAST, run, api=api)
    sent = len(api.sent)
    calls = [asyncio.ensure_future(first.complete(request(t))) for t in texts]
    while len(api.sent) == sent:
        await asyncio.sleep(0.01)
    for task in [*calls, *first._followers]:
        task.cancel()


@pytest.mark.parametrize("metadata", [True, False], ids=["openai-like", "anthropic-like"])
@pytest.mark.parametrize("how", ["deleted", "emptied", "torn", "wrong shape"])
async def test_a_lost_journal_finds_the_open_batch_in_the_providers_list_and_pays_for_it_once(
    tmp_path: Path, how: str, metadata: bool
) -> None:
    api = MemoryBatches(keeps_metadata=metadata)
    released = asyncio.Event()
    api.ends = lambda batch_id: released.is_set()
    path = tmp_path / "batches.jsonl"
    await killed_after_sending(api, str(path), ["task 0", "task 1", "task 2"], RUN)
    damage_journal(path, how)
    recover_journal(path, RUN.uid)  # what the driver does before the collectors start
    assert BatchJournal(path, SPEC.spec, RUN.uid).open_batches() == {}  # the journal no longer knows the batch

    again = BatchCollector(SPEC, str(path), FAST, LOST, api=api)
    assert await again.resume() == 1
    calls = [asyncio.ensure_future(again.complete(request(t))) for t in ("task 2", "task 0", "new task", "task 1")]
    await asyncio.sleep(0.3)
    assert list(api.sent) == ["batch_0"]  # nothing is sent while the batch whose keys are unknown is out
    released.set()
    answers = await asyncio.gather(*calls)
    assert [a.text for a in answers if isinstance(a, Completion)] == [
        "re: task 2",
        "re: task 0",
        "re: new task",
        "re: task 1",
    ]
    sent = [json.loads(line)["custom_id"] for lines in api.sent.values() for line in lines]
    assert len(sent) == len(set(sent)) == 4  # each call once: the three found, the new one sent after
    assert api.sent["batch_1"] == [api.line(ResponseCache.key(SPEC.spec, request("new task")), request("new task"))]
    assert BatchJournal(path, SPEC.spec, RUN.uid).open_batches() == {}  # found, recorded, every answer handed over


async def test_another_runs_batches_in_the_list_are_left_alone_when_the_provider_keeps_metadata(
    tmp_path: Path,
) -> None:
    api = MemoryBatches()
    api.ends = lambda batch_id: False
    await killed_after_sending(api, str(tmp_path / "theirs.jsonl"), ["their task"], BatchRun(uid="run-b", since=0))
    ours = BatchCollector(SPEC, str(tmp_path / "batches.jsonl"), FAST, LOST, api=api)
    assert await ours.resume() == 0
    call = asyncio.ensure_future(ours.complete(request("our task")))
    while len(api.sent) < 2:  # sent at once: nothing of this run is out
        await asyncio.sleep(0.01)
    assert api.metadata["batch_1"]["redraft_run"] == "run-a"
    await ours.cancel_open()
    assert api.cancelled == ["batch_1"] and isinstance(await call, LineFailure)


async def test_a_batch_that_may_be_another_runs_is_waited_for_but_never_cancelled(tmp_path: Path) -> None:
    api = MemoryBatches(keeps_metadata=False)  # Anthropic's: whose a batch is, only its custom ids say
    released = asyncio.Event()
    api.ends = lambda batch_id: released.is_set()
    await killed_after_sending(api, str(tmp_path / "theirs.jsonl"), ["their task"], BatchRun(uid="run-b", since=0))
    ours = BatchCollector(SPEC, str(tmp_path / "batches.jsonl"), FAST, LOST, api=api)
    assert await ours.resume() == 1
    call = asyncio.ensure_future(ours.complete(request("our task")))
    await asyncio.sleep(0.3)
    assert list(api.sent) == ["batch_0"]
    released.set()
    answer = await call
    assert isinstance(answer, Completion) and answer.text == "re: our task" and list(api.sent) == ["batch_0", "batch_1"]

    stopped = BatchCollector(SPEC, str(tmp_path / "again.jsonl"), FAST, LOST, api=MemoryBatches(keeps_metadata=False))
    stopped._api.sent["batch_x"], stopped._api.created["batch_x"] = [], 0.0  # type: ignore[attr-defined]
    stopped._api.metadata["batch_x"] = {}  # type: ignore[attr-defined]
    stopped._api.ends = lambda batch_id: False  # type: ignore[attr-defined]
    assert await stopped.resume() == 1
    assert await stopped.cancel_open() == 0 and stopped._api.cancelled == []  # type: ignore[attr-defined]


async def test_a_collector_restarted_after_dying_mid_line_looks_its_batch_up_in_the_list(tmp_path: Path) -> None:
    """Ray restarts a dead collector in place; the driver did not recover the journal since, and its last line is
    the torn record of the batch it had just sent."""
    api = MemoryBatches()
    released = asyncio.Event()
    api.ends = lambda batch_id: released.is_set()
    path = tmp_path / "batches.jsonl"
    await killed_after_sending(api, str(path), ["task 0", "task 1"], RUN)
    damage_journal(path, "torn")
    restarted = BatchCollector(SPEC, str(path), FAST, RUN, api=api)  # the run's settings: journal_lost False
    assert await restarted.resume() == 1
    calls = [asyncio.ensure_future(restarted.complete(request(t))) for t in ("task 1", "task 0")]
    await asyncio.sleep(0.2)
    released.set()
    assert [a.text for a in await asyncio.gather(*calls) if isinstance(a, Completion)] == ["re: task 1", "re: task 0"]
    assert list(api.sent) == ["batch_0"]


async def test_a_list_that_does_not_read_leaves_the_journals_batches_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = MemoryBatches()

    async def down(since: float) -> list[Listed]:
        raise RetryableBackendError("openai:gpt-4o-mini: HTTP 503", status=503)

    api.listed = down  # type: ignore[method-assign]
    assert await BatchCollector(SPEC, str(tmp_path / "batches.jsonl"), FAST, LOST, api=api).resume() == 0
    assert "could not list the provider's batches: openai:gpt-4o-mini: HTTP 503; calls may be sent again" in caplog.text


async def test_a_torn_line_another_endpoint_cut_aside_still_sends_the_restarted_collector_to_the_list(
    tmp_path: Path,
) -> None:
    """Found by test_journal_machine.py: the collector of another endpoint appended first, which moved the torn line
    aside; the journal then reads whole, but the batch of that line is still out at the provider."""
    api = MemoryBatches()
    api.ends = lambda batch_id: False
    path = tmp_path / "batches.jsonl"
    await killed_after_sending(api, str(path), ["task 0", "task 1"], RUN)
    damage_journal(path, "torn")
    BatchJournal(path, OTHER, RUN.uid).submitted("msgbatch_1", ["a"], 1.5)  # cuts the torn line aside first
    assert BatchJournal(path, SPEC.spec, RUN.uid).open_batches() == {}
    restarted = BatchCollector(SPEC, str(path), FAST, RUN, api=api)
    assert await restarted.resume() == 1  # batch_0, found in the provider's list: its calls not sent again


async def test_a_journal_found_lost_still_sends_a_later_resume_to_the_list(tmp_path: Path) -> None:
    """Found by test_journal_machine.py: a batch found only in the provider's list is journaled once it ends; a run
    killed again before that, its journal since written anew, must look in the list again."""
    from redraft.actors._batches import batch_run
    from redraft.rundir import RunStore
    from tests.unit.rundir.test_damaged_rundir import manifest

    store = RunStore.open(tmp_path / "run", manifest())
    store.sends_batches()
    api = MemoryBatches()
    api.ends = lambda batch_id: False
    path = store.root / "batches.jsonl"
    run = BatchRun(uid=store.run_uid, since=0.0)
    await killed_after_sending(api, str(path), ["task 0"], run)
    path.unlink()
    assert await BatchCollector(SPEC, str(path), FAST, batch_run(store), api=api).resume() == 1
    BatchJournal(path, OTHER, store.run_uid).submitted("msgbatch_1", ["a"], 1.5)  # the resumed run goes on, killed
    again = BatchCollector(SPEC, str(path), FAST, batch_run(store), api=api)
    assert await again.resume() == 1  # batch_0 still out: followed, its call not sent again
    store.finish(0.0)
