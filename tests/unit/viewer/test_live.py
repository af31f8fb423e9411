"""A run still being written: its page shows each task once it lands, with progress, rate, ETA and spend, reads
a torn tail as no error, and says the run finished (or was interrupted) once its writer is gone."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from redraft.actors._live import LiveTally, recorded
from redraft.rundir.layout import LIVE
from redraft.viewer import make_app
from redraft.viewer._app import Viewer
from redraft.viewer._site import Site
from tests.support.viewer_runs import LiveRun
from tests.unit.viewer.conftest import text_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveRun]:
    run = LiveRun(tmp_path / "runs" / "going", total=10)
    yield run
    run.store.close()


def _progress(client: TestClient) -> str:
    return text_of(client.get("/run?d=going&part=live").text, "progress")


def test_a_running_run_shows_its_tasks_as_they_land_with_rate_eta_and_spend(live: LiveRun, tmp_path: Path) -> None:
    clock = Clock()
    with TestClient(make_app(tmp_path / "runs", clock=clock)) as client:
        live.add(2)
        first = _progress(client)
        assert first.startswith("running · 2 of 10 tasks") and "tasks/s" not in first
        live.add(3)
        clock.now += 10.0
        page = client.get("/run?d=going&part=live").text
        said = text_of(page, "progress")
        assert "running · 5 of 10 tasks" in said
        assert "0.30 tasks/s" in said and "about 17 s left" in said  # 3 tasks in 10 s; 5 left
        spent = float(re.search(r"spent \$([0-9.]+)", said).group(1))  # type: ignore[union-attr]
        assert spent > 0
        assert 'data-state="running"' in page and len(re.findall(r'<a href="/task\?d=going', page)) == 5
        assert "running" in client.get("/").text.split("going</a>")[1].split("</tr>")[0]
        whole = client.get("/run?d=going").text
        assert "part=live" in whole  # the page polls while the run is written


def test_a_torn_tail_is_no_error(live: LiveRun, tmp_path: Path) -> None:
    live.add(2)
    with (tmp_path / "runs" / "going" / "results.jsonl").open("ab") as f:
        f.write(b'{"task_id": "half a li')  # a writer mid-line
    with TestClient(make_app(tmp_path / "runs")) as client:
        answer = client.get("/run?d=going")
        assert answer.status_code == 200 and "2 of 10 tasks" in text_of(answer.text, "progress")


def test_a_run_whose_writer_ended_is_finished_or_interrupted(live: LiveRun, tmp_path: Path) -> None:
    live.add(2)
    live.store.close()  # killed before its summary: interrupted
    with TestClient(make_app(tmp_path / "runs")) as client:
        assert text_of(client.get("/run?d=going").text, "progress").startswith("interrupted · 2 of 10")
    again = LiveRun(tmp_path / "runs" / "going", total=10)
    again.add(1)
    again.finish()
    with TestClient(make_app(tmp_path / "runs")) as client:
        said = text_of(client.get("/run?d=going").text, "progress")
        assert said.startswith("finished · 3 of 10")
        assert "part=live" not in client.get("/run?d=going").text  # nothing left to poll for


def test_a_long_run_s_first_page_shows_before_its_records_are_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from redraft.viewer import _index

    gate, reached = threading.Event(), threading.Event()
    real = _index.read_rows

    def slow(path: Path) -> Iterator[_index.Row]:
        for i, row in enumerate(real(path)):
            if i == 2:
                reached.set()
                gate.wait()  # the rest of the records are still being read
            yield row

    monkeypatch.setattr(_index, "read_rows", slow)
    site = Site(root, patience=0.0)
    with TestClient(Viewer(site).app()) as client:
        assert 'data-loading="1"' in client.get("/run?d=mixed").text  # the read begins; the page does not wait
        reached.wait()
        page = client.get("/run?d=mixed").text
        assert 'data-loading="1"' in page and "part=live" in page  # it fills in by itself
        assert text_of(page, "loading").startswith("Reading the run's records: 2 so far")
        assert len(re.findall(r'<a href="/task\?d=mixed', page)) == 2
        gate.set()
        site.index((root / "mixed").resolve()).settle()
        page = client.get("/run?d=mixed&part=live").text
        assert 'data-loading="0"' in page and len(re.findall(r'<a href="/task\?d=mixed', page)) == 6


def test_a_running_run_shows_its_tasks_in_flight_with_their_round_as_its_driver_wrote_them(
    live: LiveRun, tmp_path: Path
) -> None:
    live.add(2)
    with TestClient(make_app(tmp_path / "runs")) as client:
        assert 'id="flight"' not in client.get("/run?d=going&part=live").text  # the driver has said nothing yet
        tally = LiveTally()
        recorded(live.store.root, None)(tally.live([("t7", 1), ("t8", 0), ("t9", None)], hosts=[]))
        page = client.get("/run?d=going&part=live").text
        assert text_of(page, "flight").startswith("3 in flight · 1 in round 0 · 1 in round 1 · 1 being graded")
        rows = re.findall(r"<tr><td>(\w+)</td><td>([\w ]+)</td></tr>", page.split('id="flight"')[1])
        assert rows == [("t7", "round 1"), ("t8", "round 0"), ("t9", "being graded")]
        (live.store.root / LIVE).write_text('{"rounds": "not a map"')  # torn, or not the driver's: nothing shown
        assert 'id="flight"' not in client.get("/run?d=going&part=live").text
        live.store.close()  # the run ended: its file goes, and an interrupted run has nothing in flight
        assert 'id="flight"' not in client.get("/run?d=going&part=live").text
