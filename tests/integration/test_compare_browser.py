"""``comparison.html`` in a real browser: headless Chromium loads it, every plot decodes, and a screenshot.

The figures are made by hand (no Ray): what is tested here is the page, not the
statistics. Like the report's, the page's script sets ``<body
data-images-loaded="ok/all">`` once loaded, which ``--dump-dom`` shows. The
screenshot is saved as ``test-artifacts/comparison.png`` for a person to look at.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from PIL import Image

from redraft.comparison._analysis import ArmFigures, Comparison, Curve, Difference, Interval
from redraft.comparison._html import write_html
from tests.integration.test_report_browser import ARTIFACTS, CHROMIUM, chromium

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)"
)


def arm(name: str, rate: float, calls: float, *, oracle: bool = False) -> ArmFigures:
    return ArmFigures(
        name=name,
        oracle=oracle,
        repeats=1,
        tasks=80,
        ungraded=0,
        pass_rate=rate,
        ci=Interval(rate - 0.09, rate + 0.08),
        feedback_pass_rate=rate + 0.02,
        initial_pass_rate=0.3,
        mean_calls=calls,
        mean_tokens=calls * 180,
        mean_usd=0.0,
        total_calls=round(calls * 80),
        total_tokens=round(calls * 180 * 80),
        total_usd=0.0,
        wall_s=40.0,
        pass_rate_by_round=[0.3, (0.3 + rate) / 2, rate],
        fixed_by_round={"1": 0.5, "2": 0.45},
        broken_by_round={"1": 0.05, "2": 0.0},
        false_alarm_rate=0.1,
        miss_rate=0.2,
        rollback_saved_rate=None,
        rollbacks=0,
    )


def difference(a: str, b: str, mean: float, budget: float | None = None) -> Difference:
    ci = Interval(mean - 0.09, mean + 0.09)
    significant = not ci.low <= 0 <= ci.high
    p = 0.01 if significant else 0.2
    return Difference(a=a, b=b, mean=mean, ci=ci, test="paired_t", p=p, significant=significant, budget=budget)


def curve(name: str) -> Curve:
    rates = [1 - 0.7**n for n in range(1, 9)]
    return Curve(
        name=name,
        samples=8,
        pass_rate=rates,
        mean_calls_per_sample=1.0,
        mean_tokens_per_sample=60.0,
        mean_usd_per_sample=0.0,
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("comparison")
    arms = [arm("adversarial", 0.825, 3.1), arm("self_refine", 0.7, 3.4)]
    comparison = Comparison(
        scenario="arithmetic",
        match="calls",
        tasks=80,
        arms=arms,
        baselines=[curve("best_of_n"), curve("self_consistency")],
        against_baselines=[
            difference(a.name, c, 0.16, a.mean_calls) for a in arms for c in ("best_of_n", "self_consistency")
        ],
        between_arms=[difference("adversarial", "self_refine", 0.125)],
        notes=["within noise (p >= 0.05, and the 95% interval of the difference holds 0): adversarial vs self_refine"],
    )
    reports = {}
    for a in arms:
        report = out / "arms" / a.name / "report.html"
        report.parent.mkdir(parents=True)
        report.write_text("<html><body>report</body></html>")
        reports[a.name] = f"arms/{a.name}/report.html"
    return write_html(comparison, out, reports)


def test_the_comparison_renders_with_every_plot_loaded(page: Path, tmp_path: Path) -> None:
    dom = chromium(tmp_path, page.as_uri(), "--dump-dom").stdout
    assert 'data-images-loaded="3/3"' in dom  # set by the page's script: every <img> decoded
    assert len(re.findall(r"<img ", dom)) == 3
    headings = re.findall(r"<h2[^>]*>([^<]+)</h2>", dom)
    assert headings == [
        "Arms and baselines",
        "Plots",
        "Against the sampling baselines, at the arm's own cost",
        "Arm against arm",
        "What the critics and revisions did",
        "Baselines",
        "Notes",
    ]
    for name in ("adversarial", "self_refine"):
        assert f'href="arms/{name}/report.html"' in dom
        assert (page.parent / "arms" / name / "report.html").exists()  # the link leads somewhere


def test_screenshot_of_the_comparison(page: Path, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "comparison.png"
    shot.unlink(missing_ok=True)
    chromium(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1280,1600")
    image = Image.open(io.BytesIO(shot.read_bytes()))
    assert image.format == "PNG" and image.size == (1280, 1600)
    colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50  # text, tables and plots, not a blank page
