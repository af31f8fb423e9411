"""The viewer's pages over a root of real run directories: the list, a run's page and its filters, a task's
page (a hostile answer stays text), a comparison side by side."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from tests.unit.viewer.conftest import text_of


def test_the_list_shows_every_directory_with_its_state_tasks_rates_and_cost(client: TestClient) -> None:
    page = client.get("/").text
    rows = re.findall(r'<tr><td><a href="([^"]+)">([^<]+)</a></td><td>([^<]+)</td><td>(.*?)</td>', page)
    assert {(href, rel, kind) for href, rel, kind, _ in rows} == {
        ("/run?d=mixed", "mixed", "run"),
        ("/comparison?d=cmp", "cmp", "comparison"),
    }
    mixed = page[page.index("/run?d=mixed") :]
    assert "finished" in mixed.split("</tr>")[0]
    assert "50.0% feedback (3/6); 75.0% graded (3/4)" in mixed.split("</tr>")[0]
    assert '<td class="num">6</td>' in mixed.split("</tr>")[0]


def test_a_filter_by_strategy_keeps_the_list_to_its_runs(client: TestClient) -> None:
    assert "/run?d=mixed" not in client.get("/?strategy=self_refine").text
    assert "/run?d=mixed" in client.get("/?strategy=adversarial").text


def test_a_run_page_lists_its_tasks_and_each_filter_narrows_them(client: TestClient) -> None:
    def shown(query: str) -> set[str]:
        page = client.get(f"/run?d=mixed&{query}")
        assert page.status_code == 200, page.text
        return set(re.findall(r'<a href="/task\?d=mixed&amp;id=[^"]+">([^<]+)</a>', page.text))

    every = shown("")
    assert every == {"suite/pass-first", "suite/late", "suite/never", "suite/html", "suite/boom", "suite/lost arbiter"}
    assert shown("feedback=fail") == {"suite/never", "suite/boom", "suite/lost arbiter"}
    assert shown("graded=none") == {"suite/boom", "suite/lost arbiter"}
    assert shown("change=fixed") == {"suite/late", "suite/html"}
    assert shown("error=any") == {"suite/boom", "suite/lost arbiter"}
    assert shown("error=RuntimeError") == {"suite/boom"}
    assert shown("stop=no_improvement") == {"suite/never"}
    assert shown("rounds_min=3") == {"suite/late", "suite/never"}
    assert shown("rounds_min=2&rounds_max=2") == {"suite/html"}
    assert shown("cost_min=0.0001&feedback=pass") == {"suite/late", "suite/html"}
    assert shown("q=PWNED") == {"suite/html"}  # full text, case ignored
    assert shown("human=none") == every


def test_a_filter_is_in_the_page_s_links_and_a_bad_one_is_said(client: TestClient) -> None:
    page = client.get("/run?d=mixed&feedback=fail&q=attempt").text
    assert text_of(page, "shown") == "1 task match"
    assert 'value="attempt"' in page and "<option selected>fail</option>" in page
    refused = client.get("/run?d=mixed&graded=maybe")
    assert refused.status_code == 404 and "graded='maybe' is not one of pass, fail, none" in refused.text


def test_a_task_page_shows_its_rounds_and_keeps_a_hostile_answer_text(client: TestClient) -> None:
    page = client.get("/task", params={"d": "mixed", "id": "suite/html"}).text
    assert re.findall(r'<h2 id="round-(\d)">', page) == ["0", "1"]
    assert "Decision: stop" in page and '<pre class="diff">' in page
    assert "critical" in page and "&lt;b&gt;Answer&lt;/b&gt;" in page  # the critique's quoted span, as text
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in page
    assert page.count("<script") == 1  # the page's own: the label form's keys
    assert "alert(" not in page.split("<script")[1].split("</script>")[0]


def test_a_task_of_a_lost_trace_still_shows_its_result(client: TestClient) -> None:
    page = client.get("/task", params={"d": "mixed", "id": "suite/lost arbiter"})
    assert page.status_code == 200 and "RayActorError" in page.text


def test_an_unknown_task_is_refused_in_one_line(client: TestClient) -> None:
    page = client.get("/task", params={"d": "mixed", "id": "nope"})
    assert page.status_code == 404 and "no task 'nope'" in page.text


def test_a_comparison_shows_each_task_s_answers_side_by_side_with_links(client: TestClient, root: Path) -> None:
    page = client.get("/comparison?d=cmp").text
    assert "arms/deep, arms/shallow" in page
    assert '<iframe src="/files/cmp/comparison.html"' in page
    assert "/task?d=cmp%2Farms%2Fdeep&amp;id=suite%2Flate" in page
    assert "/task?d=cmp%2Farms%2Fshallow&amp;id=suite%2Flate" in page
    assert client.get("/files/cmp/comparison.html").text.startswith("<!DOCTYPE html>")
    lane = client.get("/task", params={"d": "cmp/arms/shallow", "id": "suite/late"})
    assert lane.status_code == 200


def test_a_run_s_report_and_its_task_pages_are_served_with_their_links(tmp_path: Path) -> None:
    from redraft.rundir import safe_name
    from redraft.viewer import make_app
    from redraft.views.report import write_report
    from tests.support.report_runs import make_run

    run = make_run(tmp_path / "runs" / "reported")
    write_report(run)
    with TestClient(make_app(tmp_path / "runs")) as c:
        page = c.get("/run?d=reported").text
        assert '<a href="/files/reported/report.html">its report</a>' in page
        report = c.get("/files/reported/report.html")
        assert report.status_code == 200 and f'href="report/{safe_name("suite/late")}.html"' in report.text
        task = c.get(f"/files/reported/report/{safe_name('suite/late')}.html")  # the report's own link, resolved
        assert task.status_code == 200 and "suite/late" in task.text
        assert c.get("/files/reported/report/secret").status_code == 404


def test_the_list_is_newest_first(root: Path, tmp_path: Path) -> None:
    import os
    import shutil

    from redraft.viewer import make_app

    copy = tmp_path / "runs"
    shutil.copytree(root, copy)
    for i, mark in enumerate(["mixed/results.jsonl", "mixed/trace.msgpack", "mixed/manifest.json"]):
        os.utime(copy / mark, (1_000_000 + i, 1_000_000 + i))  # the run last changed long ago
    with TestClient(make_app(copy)) as c:
        assert re.findall(r'<tr><td><a href="[^"]+">([^<]+)</a>', c.get("/").text) == ["cmp", "mixed"]
        os.utime(copy / "mixed" / "results.jsonl")  # a task landed just now
        assert re.findall(r'<tr><td><a href="[^"]+">([^<]+)</a>', c.get("/").text) == ["mixed", "cmp"]
