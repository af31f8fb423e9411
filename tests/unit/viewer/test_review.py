"""People's judgements through the viewer: the label queue in a seeded order, labels that land in labels.jsonl
(history kept, the latest shown), coverage, and the blind pairwise queue of a comparison."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from starlette.testclient import TestClient

from redraft.rundir import read_judgements
from redraft.viewer._index import Row
from redraft.viewer._review import next_unlabelled, queue, shown_order
from tests.unit.viewer.conftest import csrf_of, text_of


def _rows(ids: list[str]) -> list[Row]:
    return [Row(i, t, True, None, None, 1, "threshold", None, 0.0, 0, 0.0, "", None) for i, t in enumerate(ids)]


IDS = ["suite/pass-first", "suite/late", "suite/never", "suite/html", "suite/boom", "suite/lost arbiter"]


def _queued(client: TestClient, url: str) -> tuple[str, str]:
    """Follow the queue's redirect: the task it opened, and that page."""
    answer = client.get(url, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    where = answer.headers["location"]
    task = parse_qs(urlparse(where).query)["id"][0]
    return task, client.get(where).text


def test_the_queue_s_order_is_the_seed_s_and_skips_labelled_tasks() -> None:
    assert queue(_rows(IDS), 7) == queue(_rows(IDS), 7)
    assert queue(_rows(IDS), 7) != queue(_rows(IDS), 8)
    order = ["a", "b", "c", "d"]
    assert next_unlabelled(order, {}, None) == "a"
    assert next_unlabelled(order, {"b": 1}, "a") == "c"
    assert next_unlabelled(order, {"a": 1}, "d") == "b"  # wraps round
    assert next_unlabelled(order, {"a": 1, "b": 1, "c": 1}, "d") is None


def test_labels_from_the_queue_land_in_labels_jsonl_and_the_next_task_follows(client: TestClient, root: Path) -> None:
    first, page = _queued(client, "/review?d=mixed&seed=3")
    assert first == queue(_rows(IDS), 3)[0]
    assert text_of(page, "review").startswith("Your judgement")
    assert "0 of 6 labelled; a judge&#39;s card needs 50" in page
    form = {"csrf": csrf_of(page), "d": "mixed", "id": first, "reviewer": "ann", "seed": "3"}
    nxt = re.search(r'name="next" value="([^"]+)"', page)
    assert nxt is not None
    posted = client.post(
        "/label",
        data=form
        | {"verdict": "fail", "score": "0.25", "comment": "<i>off</i>", "next": nxt.group(1).replace("&amp;", "&")},
        follow_redirects=False,
    )
    assert posted.status_code == 303
    second, page = _queued(client, posted.headers["location"])
    assert second != first and second == queue(_rows(IDS), 3)[1]
    assert "1 of 6 labelled" in page
    judged = read_judgements(root / "mixed")
    [label] = judged.labels
    assert (label.task_id, label.reviewer, label.verdict, label.score, label.comment) == (
        first,
        "ann",
        "fail",
        0.25,
        "<i>off</i>",
    )
    assert dict(label.shown) == {"page": "queue", "seed": "3"} and len(label.answer_digest) == 64


def test_a_changed_label_is_a_new_record_and_the_latest_is_shown(client: TestClient, root: Path) -> None:
    page = client.get("/task", params={"d": "mixed", "id": "suite/late"}).text
    form = {"csrf": csrf_of(page), "d": "mixed", "id": "suite/late", "reviewer": "bob"}
    client.post("/label", data=form | {"verdict": "fail"})
    client.post("/label", data=form | {"verdict": "pass", "comment": "<script>x()</script> looked again"})
    mine = [lab for lab in read_judgements(root / "mixed").labels if lab.task_id == "suite/late"]
    assert [lab.verdict for lab in mine] == ["fail", "pass"]  # history kept
    page = client.get("/task", params={"d": "mixed", "id": "suite/late"}).text
    assert 'latest label: <span class="pass">pass</span> by bob' in page
    assert "&lt;script&gt;x()&lt;/script&gt; looked again" in page and page.count("<script") == 1
    listed = client.get("/run?d=mixed&human=pass").text
    assert re.findall(r'id=suite%2F[^"]+">([^<]+)</a>', listed) == ["suite/late"]


def test_the_pairwise_queue_hides_the_lanes_until_the_choice_is_made(client: TestClient, root: Path) -> None:
    page = client.get("/pairwise?d=cmp&seed=5").text
    assert "arms/deep" not in page and "arms/shallow" not in page and "deep" not in page
    task = re.search(r'name="id" value="([^"]+)"', page)
    assert task is not None
    task_id = task.group(1)
    shown = shown_order(5, task_id, ("arms/deep", "arms/shallow"))
    form = {"csrf": csrf_of(page), "d": "cmp", "id": task_id, "seed": "5", "reviewer": "ann", "choice": "B"}
    after = client.post("/prefer", data=form)
    assert after.status_code == 200
    assert text_of(after.text, "revealed") == f"You chose B on {task_id}: A was {shown[0]}, B was {shown[1]}."
    [choice] = read_judgements(root / "cmp").preferences
    assert (choice.task_id, choice.shown, choice.choice, choice.winner) == (task_id, shown, "B", shown[1])
    assert all(len(d) == 64 for d in choice.digests)
    next_task = re.search(r'name="id" value="([^"]+)"', after.text)
    assert next_task is None or next_task.group(1) != task_id  # a task chosen on is not asked again
    assert "preferred" in client.get("/comparison?d=cmp").text


def test_the_order_shown_is_drawn_per_task_and_both_orders_occur() -> None:
    orders = {shown_order(0, f"t{i}", ("x", "y")) for i in range(40)}
    assert orders == {("x", "y"), ("y", "x")}
