"""The report's plots say what they show and are right: read from the matplotlib figures themselves."""

from __future__ import annotations

import pytest
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure

from redraft.rundir import RunReader, build_history
from redraft.views import plots
from redraft.views.report import RunFigures, plot_figures, run_summary, task_row
from tests.support.report_runs import make_run


def legend(ax: Axes) -> list[str]:
    found = ax.get_legend()
    assert found is not None
    return [text.get_text() for text in found.get_texts()]


def line(ax: Axes, starts: str) -> list[float]:
    """The y values of the line whose legend label starts with ``starts``."""
    [found] = [ln for ln in ax.get_lines() if str(ln.get_label()).startswith(starts)]
    return [float(y) for y in found.get_ydata()]


def shown_ticks(fig: Figure, axis: Axis) -> list[float]:
    """The ticks the drawn axis shows (inside its limits)."""
    fig.canvas.draw()
    low, high = sorted(axis.get_view_interval())
    return [float(t) for t in axis.get_ticklocs() if low <= t <= high]


@pytest.fixture(scope="module")
def run_plots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Figure]:
    """The report's plots of the sample run: 6 tasks, 4 graded (3 pass the grade), 3 pass the feedback."""
    reader = RunReader(make_run(tmp_path_factory.mktemp("plots") / "run"))
    figures = RunFigures()
    for i, (entry, frames) in enumerate(reader.tasks()):
        history = build_history(entry.task_id, frames)
        figures.add(task_row(i, entry.result), entry.result)
        figures.add_trace(entry.result, history.passed_by_round(), history.graded_by_round())
    return {alt: fig for fig, alt in plot_figures(run_summary(reader, figures.totals), figures)}


def test_the_pass_rate_plot_shows_graded_and_feedback_apart_each_labelled_on_0_to_100(
    run_plots: dict[str, Figure],
) -> None:
    [ax] = run_plots["graded and feedback pass rate per round"].axes
    assert ax.get_ylim() == (0.0, 100.0)
    assert "%" in ax.get_ylabel()
    labels = legend(ax)
    assert "graded pass rate (held out), of 4 graded tasks" in labels
    assert "feedback pass rate (what the loop saw)" in labels
    # The summary's figures: graded 3 of 4 (75 %), feedback 3 of 6 (50 %); neither drawn as the other.
    assert line(ax, "graded pass rate") == pytest.approx([25.0, 50.0, 75.0])
    assert line(ax, "feedback pass rate") == pytest.approx([100 / 6, 200 / 6, 50.0])
    assert "graded" in ax.get_title() and "feedback" in ax.get_title()


def test_a_run_without_grades_says_so_on_the_plot() -> None:
    fig = plots.pass_rate_by_round([0.5, 1.0], None, [1.0, 0.5])
    [ax] = fig.axes
    assert "graded pass rate (held out): no grades (no task had gold)" in legend(ax)
    assert line(ax, "feedback pass rate") == [50.0, 100.0]
    assert ax.get_ylim() == (0.0, 100.0)  # 100 % reaches the top of the axis, not past it


def test_every_count_axis_has_whole_numbers_only(run_plots: dict[str, Figure]) -> None:
    few = {"threshold": 1, "error": 2}
    for fig, axis_of in [
        (plots.horizontal_bars(few, "Stop reasons", "tasks"), lambda ax: ax.xaxis),
        (plots.tokens_by_role({"drafter": (1, 1), "critic": (2, 0)}), lambda ax: ax.xaxis),
        (plots.score_distribution([i / 10 for i in range(11)], [1] + [0] * 9, [0] * 9 + [1]), lambda ax: ax.yaxis),
        (run_plots["stop reasons"], lambda ax: ax.xaxis),
        (run_plots["feedback score distribution"], lambda ax: ax.yaxis),
    ]:
        [ax] = fig.axes
        ticks = shown_ticks(fig, axis_of(ax))
        assert len(ticks) >= 2 and all(t == int(t) for t in ticks), (ax.get_title(), ticks)


def test_the_calls_over_the_batch_stack_each_action_in_its_part_first_part_on_top() -> None:
    counts = [{"fresh": 4, "revise": 1, "critique": 3}, {"fresh": 2, "revise": 6, "critique": 0}]
    fig = plots.calls_over_the_batch(["1–5", "6–10"], counts)
    [ax] = fig.axes
    assert legend(ax) == ["fresh", "revise", "critique"]
    bars = {(c.get_label(), round(p.get_y() + p.get_height() / 2)): p for c in ax.containers for p in c}
    for row, part in zip([1, 0], counts, strict=True):  # the first part is the top row
        assert [bars[(a, row)].get_width() for a in ("fresh", "revise", "critique")] == list(part.values())
        assert bars[("revise", row)].get_x() == part["fresh"]  # stacked: revise starts where fresh ends
    ticks = {round(y): t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)}
    assert ticks == {1: "1–5", 0: "6–10"}
