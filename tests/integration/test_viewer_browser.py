"""``redraft view`` in a real browser: headless Chromium (Debian's, driven by Playwright, no browser downloaded)
against the real command serving a root of real run directories.

One walk through what a person does: the list; a run being written whose finished count grows while the page is
open (the test writes its tasks, the page polls); a filter; a task page with a hostile answer; a label given with
the keyboard that lands in ``labels.jsonl``, which ``judge calibrate --run`` then counts as people's; a blind
pairwise choice. Each step waits on the page's text, never a
clock. Screenshots are saved under ``test-artifacts/`` (the viewer's guide shows them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from redraft.rundir import read_judgements
from tests.support import judges
from tests.support.paths import REPO_ROOT
from tests.support.report_runs import make_run
from tests.support.viewer_runs import LiveRun, make_comparison

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)"
)
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is the dev extra's (pip install playwright)")
ARTIFACTS = REPO_ROOT / "test-artifacts"
WAIT_MS = 120_000
"""How long a step may wait for the page's text: generous, the machine is shared; no step sleeps."""
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("viewer-browser") / "runs"
    make_run(runs / "2026-mixed", copies=3)
    make_comparison(runs / "critics")
    return runs


@pytest.fixture(scope="module")
def live(root: Path) -> Iterator[LiveRun]:
    run = LiveRun(root / "going", total=12)
    run.add(2)
    yield run
    run.store.close()


@pytest.fixture(scope="module")
def url(root: Path, live: LiveRun) -> Iterator[str]:
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "redraft.cli", "view", str(root), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    try:
        assert server.stdout is not None
        found = re.search(r"(http://\S+)", server.stdout.readline())
        assert found is not None, server.stderr.read() if server.stderr else ""
        yield found.group(1)
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.fixture(scope="module")
def page(url: str) -> Iterator[playwright.Page]:
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(WAIT_MS)
        yield context.new_page()
        browser.close()


def shot(page: playwright.Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"viewer-{name}.png"), full_page=False)


def test_the_list_shows_every_directory(page: playwright.Page, url: str) -> None:
    page.goto(url)
    rows = page.locator("#runs tbody tr")
    playwright.expect(rows).to_have_count(3)
    text = page.inner_text("#runs")
    assert "2026-mixed" in text and "critics" in text and "going" in text
    assert "running" in page.locator("#runs tr", has_text="going").inner_text()
    shot(page, "list")


def test_a_live_run_s_count_grows_while_the_page_watches(page: playwright.Page, url: str, live: LiveRun) -> None:
    page.goto(f"{url}run?d=going")
    playwright.expect(page.locator("#done")).to_have_text("2")
    with ThreadPoolExecutor(1) as writer:  # a thread of its own: Playwright's loop runs in this one
        writer.submit(live.add, 3).result()  # written while the page is open: it polls, and shows them
    playwright.expect(page.locator("#done")).to_have_text("5")
    playwright.expect(page.locator("#tasks tbody tr")).to_have_count(5)
    assert "5 of 12 tasks" in page.inner_text("#progress")
    shot(page, "live")


def test_a_filter_narrows_the_tasks_and_is_in_the_url(page: playwright.Page, url: str) -> None:
    page.goto(f"{url}run?d=2026-mixed")
    page.select_option("select[name=feedback]", "fail")
    page.fill("input[name=q]", "attempt")
    page.click("button[type=submit]")
    playwright.expect(page.locator("#shown")).to_have_text("3 tasks match")
    assert "feedback=fail" in page.url and "q=attempt" in page.url
    shot(page, "filter")


def test_a_task_page_shows_a_hostile_answer_as_text(page: playwright.Page, url: str) -> None:
    page.goto(f"{url}run?d=2026-mixed&q=pwned")
    page.click("#tasks a >> nth=0")
    playwright.expect(page.locator("h1")).to_have_text(re.compile(r"Task suite/html#\d"))
    assert '<script>alert("pwned")</script>' in page.inner_text("body")  # shown as text, never run
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # the page's own
    shot(page, "task")


def test_a_label_given_with_the_keyboard_lands_in_labels_jsonl(page: playwright.Page, url: str, root: Path) -> None:
    page.goto(f"{url}review?d=2026-mixed&seed=4")
    playwright.expect(page.locator("#review")).to_contain_text("0 of 18 labelled")
    first = page.inner_text("h1").removeprefix("Task ")
    page.fill("#reviewer", "ann")
    page.keyboard.press("Escape")
    page.keyboard.press("f")
    playwright.expect(page.locator("#review")).to_contain_text("1 of 18 labelled")  # the next task followed
    assert page.inner_text("h1").removeprefix("Task ") != first
    [label] = read_judgements(root / "2026-mixed").labels
    assert (label.task_id, label.verdict, label.reviewer) == (first, "fail", "ann")
    page.keyboard.press("p")  # the reviewer's name is remembered by the browser
    playwright.expect(page.locator("#review")).to_contain_text("2 of 18 labelled")
    assert [lab.verdict for lab in read_judgements(root / "2026-mixed").labels] == ["fail", "pass"]
    shot(page, "label")


def test_judge_calibrate_takes_the_labels_given_in_the_browser(
    page: playwright.Page, url: str, root: Path, tmp_path: Path
) -> None:
    """The two labels the keyboard gave (the test before) are what ``judge calibrate --run`` counts as people's."""
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps(judges.RUBRIC))
    judge = "scripted:tests.support.judges:arithmetic_faithful"
    args = ["judge", "calibrate", "--run", str(root / "2026-mixed"), "--judge", judge, "--rubric", str(rubric)]
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}  # the command, as a person runs it beside the viewer
    done = subprocess.run(
        [sys.executable, "-m", "redraft.cli", *args, "--out", str(tmp_path / "card")],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "labels: 2 human labels" in done.stdout, done.stderr
    card = json.loads((tmp_path / "card" / "judge-card.json").read_text())
    given = {label.task_id for label in read_judgements(root / "2026-mixed").labels}
    assert len(given) == 2 and card["human_labels"] == 2
    assert card["program_labels"] == card["labelled"] - 2


def test_a_blind_pairwise_choice(page: playwright.Page, url: str, root: Path) -> None:
    page.goto(f"{url}comparison?d=critics")
    shot(page, "comparison")
    page.click("#pairwise")
    playwright.expect(page.locator("h1")).to_have_text("Which answer is better?")
    body = page.inner_text("body")
    assert "deep" not in body and "shallow" not in body  # the lanes' names are hidden until chosen
    shot(page, "pairwise")
    page.keyboard.press("a")
    playwright.expect(page.locator("#revealed")).to_contain_text("You chose A")
    [choice] = read_judgements(root / "critics").preferences
    assert choice.choice == "A" and set(choice.shown) == {"arms/deep", "arms/shallow"}
    assert f"A was {choice.shown[0]}, B was {choice.shown[1]}" in page.inner_text("#revealed")
