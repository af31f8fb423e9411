""" "Fixed" and "broken" count only what the kept answers show, by one definition in the end table, the report
and a comparison. Before: a revision that passed but tied on score (so the arbiter kept the failing best) was
counted as a fix ("revisions that fixed (fail → pass): 25 %") while no task was fixed, and the end table counted
a task whose round-0 leader had no grade as fixed where the comparison did not."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from redraft.comparison._analysis import arm_summary
from redraft.comparison._lane_figures import Behaviour, Grades, TaskFigures, _behaviour
from redraft.protocols.messages import Decision, Message, Result
from redraft.rundir import refinement_change
from redraft.rundir.summary import Tally
from tests.support.samples import ALL


def decision(number: int, best: tuple[int, int], produced: int, *, rolled_back: bool = False) -> Decision:
    return Decision(
        task_id="t",
        round=number,
        action="continue",
        best_round=best[0],
        best_sample=best[1],
        best_score=0.5,
        round_best_score=0.5,
        rolled_back=rolled_back,
        round_best_sample=produced,
    )


def figures(initial: bool, final: bool) -> TaskFigures:
    return TaskFigures(
        task_id="t", graded_pass=final, passed=final, initial_graded_pass=initial, calls=3, tokens=30, usd=0.0, wall_s=1
    )


def test_a_passing_revision_the_arbiter_did_not_keep_fixed_nothing() -> None:
    # Round 1's revision passes the grade, but ties on score: the arbiter keeps round 0's failing best.
    messages: list[Message] = [decision(0, (0, 0), 0), decision(1, (0, 0), 0)]
    grades: Grades = {(0, 0): False, (1, 0): True}
    behaviour = Behaviour()
    _behaviour(messages, grades, behaviour)
    arm = arm_summary("adversarial", [[figures(initial=False, final=False)]], behaviour, oracle=False)
    assert (arm.fixed_tasks, arm.broken_tasks) == (0, 0)
    assert arm.fixed_by_round == {"1": 0.0} and arm.broken_by_round == {"1": 0.0}


def test_a_revision_kept_and_passing_is_a_fix() -> None:
    messages: list[Message] = [decision(0, (0, 0), 0), decision(1, (1, 0), 0)]
    behaviour = Behaviour()
    _behaviour(messages, {(0, 0): False, (1, 0): True}, behaviour)
    assert behaviour.fixed[1].hits == 1 and behaviour.broke[1].hits == 0


@pytest.mark.parametrize("passes", list(itertools.product([False, True], repeat=4)))
def test_a_task_s_fixes_less_its_breaks_are_its_change_from_round_0_to_the_final_answer(
    passes: tuple[bool, ...],
) -> None:
    # Rounds 0..3, one candidate each; the arbiter keeps round r's candidate on even rounds only.
    grades: Grades = {(r, 0): p for r, p in enumerate(passes)}
    kept, messages = (0, 0), list[Message]()
    for r in range(len(passes)):
        kept = (r, 0) if r % 2 == 0 else kept
        messages.append(decision(r, kept, 0, rolled_back=kept != (r, 0)))
    behaviour = Behaviour()
    _behaviour(messages, grades, behaviour)
    net = sum(c.hits for c in behaviour.fixed.values()) - sum(c.hits for c in behaviour.broke.values())
    change = refinement_change(grades[(0, 0)], grades[kept])
    assert net == {"fixed": 1, "broken": -1, None: 0}[change]


def test_the_end_table_and_the_comparison_count_alike_when_round_0_has_no_grade() -> None:
    result = next(m for m in ALL if isinstance(m, Result))
    unknown_start = msgspec.structs.replace(result, initial_graded_pass=None, initial_grade=None, graded_pass=True)
    tally = Tally()
    tally.add(unknown_start)
    summary = tally.summary(wall_s=1.0)
    arm = arm_summary("a", [[figures(initial=None, final=True)]], Behaviour(), oracle=False)  # type: ignore[arg-type]
    assert (summary.graded_fixed, summary.graded_broken) == (arm.fixed_tasks, arm.broken_tasks) == (0, 0)
    assert summary.fixed == 1  # the feedback's: round 0 failed it, the final answer passed


def test_one_definition_of_fixed_and_broken() -> None:
    assert refinement_change(False, True) == "fixed"
    assert refinement_change(True, False) == "broken"
    assert refinement_change(True, True) is refinement_change(False, False) is None
    assert refinement_change(None, True) is refinement_change(False, None) is None
