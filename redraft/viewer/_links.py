"""Where the viewer's pages link: the live server's URLs, or a static bundle's files.

The same templates render both; only the `Links` they are handed differ. The server names a directory by its
path relative to the root in a query (``/run?d=arms/a``), checked on every request; the bundle writes
a directory's pages under that relative path, and links from each page relative to where it lies.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlencode

from redraft.rundir import safe_name

TASKS = "task"
"""The folder of a directory's task pages in a bundle."""


class Links:
    """The server's URLs."""

    live = True
    """Whether pages poll for what changed and take labels (the server's do; a bundle's are still)."""

    def home(self) -> str:
        return "/"

    def run(self, rel: str, query: str = "") -> str:
        return f"/run?{urlencode({'d': rel})}" + (f"&{query}" if query else "")

    def task(self, rel: str, task_id: str, query: str = "") -> str:
        return f"/task?{urlencode({'d': rel, 'id': task_id})}" + (f"&{query}" if query else "")

    def comparison(self, rel: str) -> str:
        return f"/comparison?{urlencode({'d': rel})}"

    def file(self, rel: str, name: str) -> str:
        return "/files/" + folder(rel).removeprefix("d/") + quote(name)


@dataclass(frozen=True)
class BundleLinks(Links):
    """A static bundle's relative links, from a page ``depth`` folders below the bundle's root."""

    depth: int = 0
    live = False

    def _up(self, path: str) -> str:
        return "../" * self.depth + path

    def home(self) -> str:
        return self._up("index.html")

    def run(self, rel: str, query: str = "") -> str:
        return self._up(f"{folder(rel)}index.html")

    def task(self, rel: str, task_id: str, query: str = "") -> str:
        return self._up(f"{folder(rel)}{TASKS}/{quote(safe_name(task_id))}.html")

    def comparison(self, rel: str) -> str:
        return self.run(rel)

    def file(self, rel: str, name: str) -> str:
        return self._up(f"{folder(rel)}{quote(name)}")


def folder(rel: str) -> str:
    """A directory's folder in a bundle (``d/`` its path under the root: the root itself may be a run)."""
    return "d/" + ("" if rel in ("", ".") else "/".join(quote(part) for part in rel.split("/")) + "/")
