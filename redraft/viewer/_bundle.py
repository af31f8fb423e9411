"""``redraft view --bundle OUT``: the viewer's pages as a static site (no live parts, no review), to publish.

``OUT/index.html`` lists the root's directories; each run's page is ``OUT/d/<its path>/index.html`` with the
pages of its first `MAX_PAGES` tasks under ``task/``; a comparison's page is its lanes side by side (each lane
bundled as a run); a comparison's, a tune's or a judge card's own page is copied beside. Nothing is written
outside ``OUT``, and nothing into the root.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from redraft.errors import UserError
from redraft.rundir import COMPARISON, RUN, RunReader, safe_name
from redraft.viewer._catalog import Found
from redraft.viewer._filters import Filter
from redraft.viewer._links import TASKS, BundleLinks, folder
from redraft.viewer._site import PAGE_FILES, Site, lane_path, render, task_context

MAX_PAGES = 1_000
"""Task pages a bundle writes per run: its first tasks (as the report does)."""


def write_bundle(root: Path, out: Path) -> Path:
    """Write the static site of ``root``'s directories into ``out``; return its index page."""
    root, out = root.resolve(), out.resolve()
    if out == root or root in out.parents:
        raise UserError(
            f"--bundle {out} lies inside the root {root}: the viewer writes nothing there; give a folder outside it"
        )
    site = Site(root)
    cards, unreadable = site.cards()
    out.mkdir(parents=True, exist_ok=True)
    listed = []
    for card in cards:
        found = card.found
        links = BundleLinks(0)
        if found.kind is RUN:
            _run(site, found, out)
            href = links.run(found.rel)
        elif found.kind is COMPARISON:
            _comparison(site, found, out)
            href = links.comparison(found.rel)
        else:
            href = _copied(found, out, PAGE_FILES[found.kind.name]) or ""
        listed.append(_linked(card, href))
    page = render(
        "list.html.j2",
        title="redraft view",
        links=BundleLinks(0),
        root=root.name,
        cards=listed,
        strategies=[],
        unreadable=unreadable,
    )
    (out / "index.html").write_text(page, encoding="utf-8")
    return out / "index.html"


def _linked(card: object, href: str) -> object:
    import dataclasses

    return dataclasses.replace(card, href=href)  # type: ignore[type-var]


def _depth(rel: str) -> int:
    return folder(rel).count("/")


def _run(site: Site, found: Found, out: Path) -> None:
    here = out / "d" / ("" if found.rel == "." else found.rel)
    (here / TASKS).mkdir(parents=True, exist_ok=True)
    depth = _depth(found.rel)
    context = site.run_page(found, site.rows(found), Filter(), BundleLinks(depth))
    context["report"] = None
    (here / "index.html").write_text(render("run.html.j2", **context), encoding="utf-8")
    inner = site.run_page(found, site.rows(found), Filter(), BundleLinks(depth + 1)) | {"report": None}
    (here / TASKS / "index.html").write_text(render("run.html.j2", **inner), encoding="utf-8")
    tasks = RunReader(found.path).sampled(lambda i: i < MAX_PAGES)  # one pass: no search per task
    for entry, frames in itertools.islice(tasks, MAX_PAGES):
        page = render("task_view.html.j2", **task_context(found, entry, frames, BundleLinks(depth + 1)))
        (here / TASKS / f"{safe_name(entry.task_id)}.html").write_text(page, encoding="utf-8")


def _comparison(site: Site, found: Found, out: Path) -> None:
    for lane in site.lanes(found):
        _run(site, site.place(lane_path(found.rel, lane), "run"), out)
    here = out / "d" / ("" if found.rel == "." else found.rel)
    here.mkdir(parents=True, exist_ok=True)
    _copied(found, out, PAGE_FILES[COMPARISON.name])
    context = site.comparison_page(found, BundleLinks(_depth(found.rel)), 0)
    (here / "index.html").write_text(render("comparison.html.j2", **context), encoding="utf-8")


def _copied(found: Found, out: Path, name: str) -> str | None:
    """``name`` of ``found`` copied into its folder of the bundle; its link from the bundle's index (None: none)."""
    if not (found.path / name).is_file():
        return None
    here = out / "d" / ("" if found.rel == "." else found.rel)
    here.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(found.path / name, here / name)
    return BundleLinks(0).file(found.rel, name)
