"""The review's pages and posts: the label queue and form, and a comparison's blind pairwise queue.

A post is refused (403) without this session's token (`Viewer.posted_by_us`); a post that names a task the run
does not hold, a verdict or a choice not in its closed set, or a score outside [0, 1] is refused (400). What is
written goes through `redraft.viewer._review` to `redraft.rundir.labels`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from redraft.errors import JudgementError, UserError
from redraft.rundir import RunReader, build_history
from redraft.viewer import _review as review
from redraft.viewer._catalog import Found
from redraft.viewer._index import Row
from redraft.viewer._site import render

if TYPE_CHECKING:
    from redraft.viewer._app import Viewer


def routes(viewer: Viewer) -> list[Route]:
    return [
        Route("/review", viewer.guarded(lambda r: _queue(viewer, r))),
        Route("/label", viewer.guarded(lambda r: _label(viewer, r)), methods=["POST"]),
        Route("/pairwise", viewer.guarded(lambda r: _pairwise(viewer, r))),
        Route("/prefer", viewer.guarded(lambda r: _prefer(viewer, r)), methods=["POST"]),
    ]


def task_review(viewer: Viewer, found: Found, task_id: str, query: Mapping[str, str]) -> dict[str, Any]:
    """What a task page's label form shows: the latest label, coverage, where the next task is."""
    rows = viewer.site.rows(found)
    labels = review.current_labels(found.path, rows)
    latest = review.judgements(found.path).latest_labels().get(task_id)
    seed = query.get("seed", "0")
    return {
        "csrf": viewer.csrf,
        "latest": latest,
        "stale": latest is not None and task_id not in labels,
        "coverage": review.coverage(len(labels), len(rows)),
        "seed": query.get("seed", ""),
        "next_url": "/review?" + urlencode({"d": found.rel, "seed": seed, "after": task_id}),
    }


async def _queue(viewer: Viewer, request: Request) -> Response:
    """The next unlabelled task in the seeded order (after ``after``), or the run's page when none is left."""
    found = viewer.site.place(request.query_params.get("d", ""), "run")
    seed = _seed(request.query_params)
    rows = viewer.site.rows(found)
    labels = review.current_labels(found.path, rows)
    nxt = review.next_unlabelled(review.queue(rows, seed), labels, request.query_params.get("after"))
    if nxt is None:
        return RedirectResponse(viewer.links.run(found.rel), status_code=303)
    return RedirectResponse(viewer.links.task(found.rel, nxt, urlencode({"seed": seed})), status_code=303)


async def _label(viewer: Viewer, request: Request) -> Response:
    fields = await _fields(request)
    if not viewer.posted_by_us(fields.get("csrf", "")):
        return PlainTextResponse("refused: this post did not come from this viewer's own page", status_code=403)
    found = viewer.site.place(fields.get("d", ""), "run")
    row = next((r for r in viewer.site.rows(found) if r.task_id == fields.get("id")), None)
    verdict, score = fields.get("verdict", ""), _score(fields.get("score", ""))
    seed = fields.get("seed", "")
    shown = {"page": "queue", "seed": seed} if seed else {"page": "task"}
    said = review.Said(
        fields.get("reviewer", "").strip(),
        score if isinstance(score, float) else None,
        fields.get("comment", "").strip(),
        shown,
    )
    if row is None or verdict not in ("pass", "fail") or score is False:
        return PlainTextResponse(
            "refused: a label needs a task of this run, pass or fail, a reviewer, and a score in [0, 1] if any",
            status_code=400,
        )
    try:
        review.label(found.path, row, "pass" if verdict == "pass" else "fail", said)
    except JudgementError as exc:
        return PlainTextResponse(f"refused: {exc}", status_code=400)
    after = fields.get("next", "")
    return RedirectResponse(after if _ours(after) else viewer.links.task(found.rel, row.task_id), status_code=303)


def _seed(fields: Mapping[str, str]) -> int:
    """A queue's seed (0 when not given); `UserError` when it is not a whole number."""
    text = fields.get("seed", "") or "0"
    if not text.isdigit():
        raise UserError(f"seed={text!r} is not a whole number")
    return int(text)


def _ours(url: str) -> bool:
    """Whether ``url`` is a page of this server (a path; never another host's, ``//host/...`` included)."""
    return url.startswith("/") and not url.startswith("//") and "\\" not in url


async def _fields(request: Request) -> dict[str, str]:
    """A post's form fields (URL-encoded, what the pages' forms send; anything else reads as no fields)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return {}
    body = await request.body()
    return dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))


def _score(text: str) -> float | bool | None:
    """A score in [0, 1], None when not given, False when not one."""
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        return False
    return value if 0.0 <= value <= 1.0 else False


async def _pairwise(viewer: Viewer, request: Request) -> Response:
    q = request.query_params
    found = viewer.site.place(q.get("d", ""), "comparison")
    lanes = _lanes(viewer, found, q)
    seed, reviewer = _seed(q), q.get("reviewer", "")
    judged = review.judgements(found.path)
    pair = None
    if lanes is not None:
        a, b = (_by_id(viewer, found, lane) for lane in lanes)
        left = review.pairs_left(a, b, lanes, judged, seed, reviewer)
        pair = _pair(viewer, found, left[0], lanes, seed, a, b) if left else None
    done = sum(1 for p in judged.preferences if lanes is not None and set(p.shown) == set(lanes))
    page = render(
        "pairwise.html.j2",
        title="redraft view · blind pairwise",
        links=viewer.links,
        rel=found.rel,
        pair=pair,
        seed=seed,
        csrf=viewer.csrf,
        revealed=q.get("revealed", ""),
        coverage=f"{done:,} choices made between these two lanes" + ("" if lanes else "; fewer than two lanes"),
    )
    return HTMLResponse(page)


def _lanes(viewer: Viewer, found: Found, q: Mapping[str, str]) -> tuple[str, str] | None:
    lanes = viewer.site.lanes(found)
    a, b = q.get("a") or (lanes[0] if lanes else ""), q.get("b") or (lanes[1] if len(lanes) > 1 else "")
    return (a, b) if a in lanes and b in lanes and a != b else None


def _by_id(viewer: Viewer, found: Found, lane: str) -> dict[str, Row]:
    return {r.task_id: r for r in viewer.site.index(found.path / lane).fresh()}


def _pair(viewer: Viewer, found: Found, task_id: str, lanes: tuple[str, str], seed: int, a: Any, b: Any) -> review.Pair:
    shown = review.shown_order(seed, task_id, lanes)
    rows = {lanes[0]: a[task_id], lanes[1]: b[task_id]}
    reader = RunReader(found.path / shown[0])
    history = build_history(task_id, reader.frames(reader.find(task_id)))
    prompt = history.task.message.prompt if history.task is not None else ""
    return review.Pair(task_id, shown, (rows[shown[0]].text, rows[shown[1]].text), prompt)


async def _prefer(viewer: Viewer, request: Request) -> Response:
    fields = await _fields(request)
    if not viewer.posted_by_us(fields.get("csrf", "")):
        return PlainTextResponse("refused: this post did not come from this viewer's own page", status_code=403)
    found = viewer.site.place(fields.get("d", ""), "comparison")
    lanes = _lanes(viewer, found, fields)
    seed, reviewer, task_id = _seed(fields), fields.get("reviewer", "").strip(), fields.get("id", "")
    choice = {"A": "A", "B": "B", "tie": "tie"}.get(fields.get("choice", ""))
    a, b = (_by_id(viewer, found, lane) for lane in lanes) if lanes else ({}, {})
    if lanes is None or task_id not in a or task_id not in b or choice is None:
        return PlainTextResponse(
            "refused: a choice needs a task both lanes answered, A, B or tie, and a reviewer", status_code=400
        )
    pair = _pair(viewer, found, task_id, lanes, seed, a, b)
    try:
        review.prefer(found.path, pair, reviewer, "A" if choice == "A" else "B" if choice == "B" else "tie")
    except JudgementError as exc:
        return PlainTextResponse(f"refused: {exc}", status_code=400)
    said = f"You chose {choice} on {task_id}: A was {pair.lanes[0]}, B was {pair.lanes[1]}."
    query = urlencode({"d": found.rel, "seed": seed, "reviewer": reviewer, "revealed": said})
    return RedirectResponse(f"/pairwise?{query}", status_code=303)
