"""The verdict: the validation winner against the starting prompts, on the test split, read once.

Both run on every test task; their figures are compared task by task with the comparison's paired test
(`redraft.stats.paired`: the exact McNemar test when every figure is a pass or a fail, the
paired t-test otherwise). A new prompts file is written only when the winner is better and the
difference significant (p < 0.05); otherwise the verdict says "no significant improvement" and nothing
new is written. When no candidate beat the start on validation, the test split is not read at all: the
winner is the start, and there is nothing to test.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import msgspec

from redraft.stats import paired
from redraft.tuning._edits import prompts_file
from redraft.tuning._journal import Evaluation, PromptCandidate

TUNED = "tuned-prompts.toml"
NO_GAIN = "no significant improvement"


class TuneVerdict(msgspec.Struct, frozen=True, kw_only=True):
    start: str
    winner: str
    test_read: bool
    tasks: int
    graded: bool
    """The figures are held-out grades (False: feedback scores, for a scenario with no grade)."""
    start_mean: float | None = None
    winner_mean: float | None = None
    mean: float | None = None
    """Winner minus start, over the test tasks."""
    low: float | None = None
    high: float | None = None
    p: float | None = None
    test: str | None = None
    significant: bool = False
    adopted: bool = False
    prompts: str | None = None
    """The new prompts file, relative to the tune's directory (only when adopted)."""
    says: str = ""


def unread(start: str, tasks: int) -> TuneVerdict:
    """No candidate beat the start on validation: the test split stays unread."""
    says = f"{NO_GAIN}: no candidate beat the starting prompts on validation; the test split was not read"
    return TuneVerdict(start=start, winner=start, test_read=False, tasks=tasks, graded=True, says=says)


def decide(start: Evaluation, best: Evaluation) -> TuneVerdict:
    """The paired test of ``best`` against ``start`` over the same test tasks."""
    ids = sorted(start.figures)
    result = paired([best.figures[i] for i in ids], [start.figures[i] for i in ids])
    better = result.significant and result.mean > 0
    what = "grades" if start.graded else "feedback scores (the scenario has no held-out grade)"
    if start.judge is not None:
        what = f"grades by the judge {start.judge}"
    figures = (
        f"{best.candidate} {best.mean:.3f} against the start's {start.mean:.3f} over {len(ids)} test tasks' {what}, "
        f"difference {result.mean:+.3f} [{result.low:+.3f}, {result.high:+.3f}], "
        f"p = {_p(result.p)} ({result.method.replace('_', ' ')})"
    )
    if better:
        says = f"significant improvement: {figures}"
    elif result.significant:
        says = f"{NO_GAIN} (significantly worse): {figures}"
    else:
        says = f"{NO_GAIN}: {figures}"
    return TuneVerdict(
        start=start.candidate,
        winner=best.candidate,
        test_read=True,
        tasks=len(ids),
        graded=start.graded,
        start_mean=start.mean,
        winner_mean=best.mean,
        mean=result.mean,
        low=result.low,
        high=result.high,
        p=result.p,
        test=result.method,
        significant=result.significant,
        adopted=better,
        says=says,
    )


def adopt(verdict: TuneVerdict, winner: PromptCandidate, parent: dict[str, Any], root: Path) -> TuneVerdict:
    """Write the winner as the tune's new prompts file (``tuned-prompts.toml``), its lineage in ``[about]``."""
    today = datetime.date.today().isoformat()
    made = (
        f"redraft tune, {today}: candidate {winner.id} (from {parent['parent']}); on the test split, "
        f"{verdict.says.removeprefix('significant improvement: ')}"
    )
    about = {"version": int(parent.get("version", 1)) + 1, "parent": str(parent["parent"]), "made": made}
    path = prompts_file(winner.entries, about, root / TUNED)
    return msgspec.structs.replace(verdict, prompts=str(path.relative_to(root)))


def _p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}" if p >= 1e-4 else "< 0.0001"
