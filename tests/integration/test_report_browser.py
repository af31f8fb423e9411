"""The report in a real browser: headless Chromium loads it and a task page, and takes a screenshot.

The report carries an inline script that sets ``<body data-images-loaded="ok/all">``
once the page has loaded; Chromium's ``--dump-dom`` (after a virtual-time budget,
so the load event has fired) shows whether every plot decoded. The screenshot is
saved under ``test-artifacts/`` for a person to look at.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from itertools import count
from pathlib import Path

import pytest
from PIL import Image

from redraft.rundir import safe_name
from redraft.views.report import write_report
from tests.support.paths import REPO_ROOT
from tests.support.report_runs import make_run

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)"
)
ARTIFACTS = REPO_ROOT / "test-artifacts"
# Without the background-networking flags Chromium keeps trying to reach Google's
# hosts, which this closed network refuses; --no-sandbox because tests run as root.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=10000",
]
_profiles = count()


def chromium(profile_root: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = profile_root / f"profile-{next(_profiles)}"  # a fresh, empty profile each start
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_run(tmp_path_factory.mktemp("browser") / "run")
    write_report(root)
    return root


def test_the_report_renders_with_every_plot_loaded(run_dir: Path, tmp_path: Path) -> None:
    dom = chromium(tmp_path, (run_dir / "report.html").as_uri(), "--dump-dom").stdout
    assert 'data-images-loaded="4/4"' in dom  # set by the page's script: every <img> decoded
    assert len(re.findall(r"<img ", dom)) == 4
    headings = re.findall(r"<h2[^>]*>([^<]+)</h2>", dom)
    assert headings == [
        "Summary",
        "Plots",
        "Stop reasons",
        "Tokens and cost per role",
        "Errors by cause",
        "Slowest tasks",
        "Most expensive tasks",
        "Tasks",
    ]
    assert f'href="report/{safe_name("suite/late")}.html"' in dom


def test_a_task_page_renders_its_rounds_with_model_text_as_text(run_dir: Path, tmp_path: Path) -> None:
    page = run_dir / "report" / f"{safe_name('suite/html')}.html"
    dom = chromium(tmp_path, page.as_uri(), "--dump-dom").stdout
    # It leads with the held-out grade, coloured by it; the loop's own verdict follows.
    assert re.search(r'<th>result \(graded\)</th><td><span class="pass">pass</span> · held-out grade', dom)
    assert "<th>feedback (the loop's verdict)</th>" in dom
    assert re.findall(r'<h2 id="round-(\d)">', dom) == ["0", "1"]
    assert len(re.findall(r'class="card[^"]*" id="r\d+s\d+"', dom)) == 4  # two samples in each round
    assert "Decision: stop" in dom and '<pre class="diff">' in dom
    # The candidate's <script> is text in the DOM, never an element.
    assert '&lt;script&gt;alert("pwned")&lt;/script&gt;' in dom
    assert "<script" not in dom


def test_screenshot_of_the_report(run_dir: Path, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    chromium(tmp_path, (run_dir / "report.html").as_uri(), f"--screenshot={shot}", "--window-size=1280,1600")
    image = Image.open(io.BytesIO(shot.read_bytes()))
    assert image.format == "PNG" and image.size == (1280, 1600)
    assert shot.stat().st_size > 30_000
    colours = image.convert("RGB").getcolors(maxcolors=1 << 24)  # never None: at most 2**24 RGB colours
    assert colours is not None and len(colours) > 50  # text, tables and plots, not a blank page
