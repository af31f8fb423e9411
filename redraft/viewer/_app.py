"""The viewer as an ASGI app (Starlette): pages rendered on the server, read-only but for people's judgements.

Guards, each tested:

- every directory a request names is resolved and refused unless it lies inside the root (`Site.place`);
- a post (a label, a pairwise choice) is taken only with the per-session token the server put in its own
  pages (``csrf``): a page of another site open in the same browser cannot post one;
- with an access ``token`` (required for a bind beyond loopback), every request carries it: once in the URL
  (``?token=``), which sets a cookie for the rest, or as that cookie; without one, a request must name a
  loopback host (``Host: 127.0.0.1:PORT``), so a page of another site whose name was made to resolve to
  127.0.0.1 (DNS rebinding) is refused before it can read a page's post token;
- the only file it writes is a directory's ``labels.jsonl``, through `redraft.rundir.labels`; the files it serves
  as they are (`PAGE_FILES`, a run's report) are named, never a path from the request, and each is sandboxed
  (`SANDBOX`).
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from redraft.errors import UserError
from redraft.rundir import RUN
from redraft.rundir.layout import PAGES_DIR, REPORT
from redraft.viewer import _review as review
from redraft.viewer._filters import Filter
from redraft.viewer._links import Links
from redraft.viewer._site import PAGE_FILES, Site, render

COOKIE = "redraft_view"
SERVED = frozenset({REPORT, *PAGE_FILES.values()})
"""The files of a directory served as they are: the pages redraft wrote for a person."""
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]", "testserver")
"""The names a loopback server answers to (``testserver``: Starlette's test client)."""
SANDBOX = "sandbox allow-scripts"
"""How a served page is shown: its own scripts run (a report marks its plots loaded), in an origin of no site, so
nothing in it can read the viewer's pages or their post token."""
Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Viewer:
    """One server's state: its site, its session's post token, its access token (None on loopback)."""

    site: Site
    token: str | None = None
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    links: Links = field(default_factory=Links)
    host: str = "127.0.0.1"
    """The address it is bound to (a loopback one, without a token): a request may name it."""

    def app(self) -> Starlette:
        from redraft.viewer import _review_routes as reviewing

        routes = [
            Route("/", self._guarded(self.home)),
            Route("/index.html", self._guarded(self.home)),
            Route("/run", self._guarded(self.run)),
            Route("/task", self._guarded(self.task)),
            Route("/comparison", self._guarded(self.comparison)),
            Route("/files/{path:path}", self._guarded(self.file)),
            *reviewing.routes(self),
        ]
        # Without a token the server is loopback's alone: a request naming another host is a page of another
        # site that had its name resolve to 127.0.0.1 (DNS rebinding), which could read the post token.
        hosts = ["*"] if self.token is not None else [*LOOPBACK_NAMES, self.host]
        return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)])

    def _guarded(self, handler: Handler) -> Handler:
        """``handler`` behind the access token, with a refused path or a bad filter answered in one line."""

        async def guarded(request: Request) -> Response:
            given = request.query_params.get("token") or request.cookies.get(COOKIE) or ""
            if self.token is not None and not hmac.compare_digest(given.encode(), self.token.encode()):
                return PlainTextResponse("this viewer needs its token: open the URL it printed", status_code=403)
            try:
                response = await handler(request)
            except UserError as exc:
                return PlainTextResponse(str(exc), status_code=404)
            if self.token is not None and request.query_params.get("token"):
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            return response

        return guarded

    def guarded(self, handler: Handler) -> Handler:
        return self._guarded(handler)

    def posted_by_us(self, token: str) -> bool:
        """Whether a post carries this session's token (constant time)."""
        return hmac.compare_digest(token.encode(), self.csrf.encode())

    async def home(self, request: Request) -> Response:
        cards, unreadable = self.site.cards(human=lambda found: self.human_counts(found.path))
        strategy = request.query_params.get("strategy", "")
        hrefs = {c.found.rel: self.href(c.found.kind.name, c.found.rel) for c in cards}
        shown = [
            dataclasses.replace(c, href=hrefs[c.found.rel]) for c in cards if not strategy or c.strategy == strategy
        ]
        page = render(
            "list.html.j2",
            title="redraft view",
            links=self.links,
            root=str(self.site.root),
            cards=shown,
            strategies=sorted({c.strategy for c in cards if c.strategy}),
            unreadable=unreadable,
        )
        return HTMLResponse(page)

    def href(self, kind: str, rel: str) -> str:
        if kind == "run":
            return self.links.run(rel)
        if kind == "comparison":
            return self.links.comparison(rel)
        return self.links.file(rel, PAGE_FILES[kind])

    def human_counts(self, path: Path) -> tuple[int, int]:
        """(passed, labelled) of a run's current labels; a run nobody labelled is not read for them."""
        if not review.has_judgements(path):
            return 0, 0
        labels = review.current_labels(path, self.site.index(path).fresh())
        return sum(label.verdict == "pass" for label in labels.values()), len(labels)

    async def run(self, request: Request) -> Response:
        found = self.site.place(request.query_params.get("d", ""), "run")
        if request.query_params.get("review"):
            return RedirectResponse("/review?" + urlencode({"d": found.rel}), status_code=303)
        f = Filter.parse(request.query_params)
        rows = self.site.rows(found)
        labels = review.current_labels(found.path, rows)
        human = review.human_verdicts(labels)
        context = self.site.run_page(
            found,
            rows,
            f,
            self.links,
            human=human,
            counts=(sum(human.values()), len(human)),
            coverage=review.coverage(len(labels), len(rows)),
        )
        name = "run_part.html.j2" if request.query_params.get("part") == "live" else "run.html.j2"
        return HTMLResponse(render(name, **context))

    async def task(self, request: Request) -> Response:
        from redraft.viewer._review_routes import task_review

        found = self.site.place(request.query_params.get("d", ""), "run")
        task_id = request.query_params.get("id", "")
        context = self.site.task_context(found, task_id, self.links)
        context |= task_review(self, found, task_id, request.query_params)
        return HTMLResponse(render("task_view.html.j2", **context))

    async def comparison(self, request: Request) -> Response:
        found = self.site.place(request.query_params.get("d", ""), "comparison")
        page = Filter.parse({"page": request.query_params.get("page", "")}).page
        share = review.preference_share(review.judgements(found.path))
        return HTMLResponse(render("comparison.html.j2", **self.site.comparison_page(found, self.links, page, share)))

    async def file(self, request: Request) -> Response:
        """A page redraft wrote for a person, by its path under the root (``/files/DIR/NAME``), so the links
        inside it (a comparison's to its lanes' reports, a report's to its task pages) land too."""
        parts = str(request.path_params["path"]).split("/")
        pages = len(parts) >= 2 and parts[-2] == PAGES_DIR  # a report's task page: DIR/report/NAME.html
        where, name = "/".join(parts[: -2 if pages else -1]) or ".", parts[-1]
        found = self.site.place(where)
        served = name.endswith(".html") and found.kind is RUN if pages else name in SERVED
        path = found.path / PAGES_DIR / name if pages else found.path / name
        if not served or "/" in name or name.startswith(".") or not path.is_file():
            raise UserError(f"{request.path_params['path']!r} is not a page this viewer serves")
        return FileResponse(path, media_type="text/html", headers={"Content-Security-Policy": SANDBOX})
