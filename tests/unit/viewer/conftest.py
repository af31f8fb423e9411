"""A root of run directories for the viewer's tests, made once per module, and an app over it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from redraft.viewer import make_app
from tests.support.report_runs import make_run
from tests.support.viewer_runs import make_comparison


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("viewer") / "runs"
    make_run(runs / "mixed")
    make_comparison(runs / "cmp")
    return runs


@pytest.fixture
def client(root: Path) -> Iterator[TestClient]:
    with TestClient(make_app(root)) as c:
        yield c


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, "the page carries no post token"
    return found.group(1)


class _Text(HTMLParser):
    """The text inside the element of one id (its children's included), spaces collapsed."""

    VOID = frozenset({"input", "br", "img", "meta", "link", "hr"})

    def __init__(self, element_id: str) -> None:
        super().__init__()
        self.element_id, self.depth, self.parts, self.found = element_id, 0, [], False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        if self.depth:
            self.depth += 1
        elif dict(attrs).get("id") == self.element_id and not self.found:
            self.depth, self.found = 1, True

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag not in self.VOID:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.parts.append(data)


def text_of(page: str, element_id: str) -> str:
    parser = _Text(element_id)
    parser.feed(page)
    assert parser.found, f"no #{element_id} on the page"
    return " ".join("".join(parser.parts).split())
