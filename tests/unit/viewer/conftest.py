"""A root of run directories for the viewer's tests, made once per module, and an app over it."""

from __future__ import annotations

import re
from collections.abc import Iterator
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


def text_of(page: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', page, re.S)
    assert found is not None, f"no #{element_id} on the page"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()
