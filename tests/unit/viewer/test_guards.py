"""What the viewer refuses: paths outside its root, posts without its session's token, requests without its
access token, files it does not serve; and that it writes nothing but labels.jsonl."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from redraft.viewer import make_app
from redraft.viewer._serve import access_token
from tests.unit.viewer.conftest import csrf_of


@pytest.mark.parametrize("place", ["..", "../..", "mixed/../..", "/etc", "/", "mixed/../../outside", "mixed\x00"])
def test_a_path_outside_the_root_is_refused(client: TestClient, place: str) -> None:
    for route in ("/run", "/comparison", "/task", "/review", "/pairwise"):
        answer = client.get(route, params={"d": place, "id": "suite/late"})
        assert answer.status_code == 404, (route, place)
    file = client.get(f"/files/{quote(place.strip('/'), safe='')}/comparison.html")
    assert file.status_code == 404, place


def test_a_link_out_of_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "comparison.html").write_text("secret page")
    (outside / "comparison.json").write_text("{}")
    link = root / "escape"
    link.symlink_to(outside)
    try:
        with TestClient(make_app(root)) as c:
            assert c.get("/files/escape/comparison.html").status_code == 404
            assert "escape" not in c.get("/").text
    finally:
        link.unlink()


def test_only_the_pages_redraft_wrote_are_served_as_files_each_sandboxed(client: TestClient) -> None:
    served = client.get("/files/cmp/comparison.html")
    assert served.status_code == 200 and served.headers["content-security-policy"] == "sandbox allow-scripts"
    for name in (
        "secret",
        "manifest.json",
        "results.jsonl",
        "..%2Fmixed%2Fsecret",
        "report/..%2Fsecret",
        "labels.jsonl",
    ):
        assert client.get(f"/files/mixed/{name}").status_code == 404, name


def test_a_post_without_the_session_s_token_is_refused_and_writes_nothing(client: TestClient, root: Path) -> None:
    label = {"d": "mixed", "id": "suite/late", "verdict": "pass", "reviewer": "ann"}
    assert client.post("/label", data=label).status_code == 403
    assert client.post("/label", data=label | {"csrf": "not-the-token"}).status_code == 403
    prefer = {"d": "cmp", "id": "suite/late", "choice": "A", "reviewer": "ann", "csrf": "forged"}
    assert client.post("/prefer", data=prefer).status_code == 403
    assert not (root / "mixed" / "labels.jsonl").exists() and not (root / "cmp" / "labels.jsonl").exists()


def test_a_bad_label_is_refused(client: TestClient, root: Path) -> None:
    token = csrf_of(client.get("/task", params={"d": "mixed", "id": "suite/late"}).text)
    base = {"csrf": token, "d": "mixed", "id": "suite/late", "verdict": "pass", "reviewer": "ann"}
    for bad in ({"verdict": "maybe"}, {"score": "1.5"}, {"score": "x"}, {"reviewer": " "}, {"id": "nope"}):
        assert client.post("/label", data=base | bad, follow_redirects=False).status_code == 400, bad
    assert not (root / "mixed" / "labels.jsonl").exists()


def test_with_an_access_token_every_request_needs_it(root: Path) -> None:
    with TestClient(make_app(root, token="s3cret")) as c:
        assert c.get("/").status_code == 403
        assert c.get("/?token=wrong").status_code == 403
        assert c.get("/run?d=mixed").status_code == 403
        assert c.get("/?token=s3cret").status_code == 200
        assert c.get("/run?d=mixed").status_code == 200  # the cookie the first visit set


def test_a_bind_beyond_loopback_gets_a_token_and_loopback_needs_none() -> None:
    assert access_token("127.0.0.1", None) is None
    assert access_token("::1", None) is None
    assert access_token("localhost", "given") == "given"
    made = access_token("0.0.0.0", None)
    assert made is not None and len(made) >= 20
    assert access_token("0.0.0.0", "mine") == "mine"


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_a_session_of_pages_and_labels_writes_nothing_but_labels(root: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "runs"
    shutil.copytree(root, copy, symlinks=True)
    before = _tree(copy)
    with TestClient(make_app(copy)) as c:
        for url in ("/", "/run?d=mixed", "/run?d=mixed&q=x", "/comparison?d=cmp", "/pairwise?d=cmp"):
            assert c.get(url).status_code == 200
        token = csrf_of(c.get("/task", params={"d": "mixed", "id": "suite/late"}).text)
        c.post("/label", data={"csrf": token, "d": "mixed", "id": "suite/late", "verdict": "fail", "reviewer": "a"})
    after = _tree(copy)
    assert set(after) - set(before) == {os.path.join("mixed", "labels.jsonl")}
    assert {k for k in before if before[k] != after[k]} == set()


def test_without_a_token_a_request_for_another_host_is_refused(client: TestClient) -> None:
    """A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) cannot read a page's post token."""
    assert (
        client.get("/task", params={"d": "mixed", "id": "suite/late"}, headers={"host": "evil.example"}).status_code
        == 400
    )
    assert client.get("/", headers={"host": "127.0.0.1:8765"}).status_code == 200
    assert client.get("/", headers={"host": "localhost:8765"}).status_code == 200
