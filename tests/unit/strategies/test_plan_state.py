"""A plan's pieces without a model: replies read into plans and decisions (leniently, never raising), a
revision's diff, what a reset forgets, and the program the verified steps make together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from redraft.protocols.messages import Observation, PlanStep, StepContract
from redraft.strategies._plan_state import PlanState, Verified, compose, diff, read_decision, read_plan

STEP = {"intent": "gather", "inputs": ["a.csv"], "output": "g.csv", "columns": ["id"], "types": {"id": "integer"}}


def step(number: int, output: str, inputs: list[str] = (), intent: str = "") -> PlanStep:  # type: ignore[assignment]
    return PlanStep(number=number, intent=intent or f"make {output}", inputs=list(inputs), output=output)


def test_a_plan_is_read_from_json_fenced_or_in_prose_with_type_names_made_canonical() -> None:
    plain = json.dumps({"steps": [STEP, {**STEP, "output": "out.csv", "types": {"d": "DATE", "x": "blob"}}]})
    for text in (plain, f"Here is the plan:\n```json\n{plain}\n```\nDone.", f"Sure! {plain} Hope it helps."):
        plan = read_plan(text)
        assert plan is not None and [s.number for s in plan] == [1, 2]
        assert plan[0].contract == StepContract(columns=["id"], types={"id": "int"})
        assert plan[1].contract.types == {"d": "date"}  # an unknown type name is dropped, not refused


def test_replies_that_are_no_plan_read_as_none_and_never_raise() -> None:
    bad = [
        "",
        "I'm ready to help you with your project.",
        "{not json}",
        json.dumps({"steps": []}),
        json.dumps({"steps": [{**STEP, "output": ""}]}),  # no output file
        json.dumps({"steps": [{**STEP, "output": "../escape.csv"}]}),  # not a plain name
        json.dumps({"steps": [{**STEP, "output": "step 1.csv"}]}),
        json.dumps({"steps": [{**STEP, "output": "main.py"}]}),  # the sandbox's own program
        json.dumps({"steps": [{**STEP, "intent": " "}]}),
        json.dumps({"steps": [STEP, STEP]}),  # two steps writing one file
        json.dumps({"steps": "many"}),
        "[" * 10_000,
    ]
    assert [read_plan(text) for text in bad] == [None] * len(bad)


def test_a_decision_is_read_or_none() -> None:
    decision = read_decision('{"action": "revise", "redo": 2, "reason": "dates", "steps": []}')
    assert decision is not None and (decision.action, decision.redo) == ("revise", 2)
    assert read_decision('{"action": "dance"}') is None and read_decision("continue") is None


def test_a_diff_matches_steps_by_output_and_names_added_removed_and_changed() -> None:
    old = [step(1, "a.csv"), step(2, "b.csv", ["a.csv"]), step(3, "out.csv", ["b.csv"]), step(4, "x.csv")]
    new = [step(1, "a.csv"), step(2, "b.csv", ["a.csv"]), step(3, "c.csv", ["b.csv"]), step(4, "out.csv", ["c.csv"])]
    assert diff(old, new) == ([3], [4], [4])  # c.csv added; x.csv removed; out.csv now reads c.csv


def observed(number: int, output: str) -> Observation:
    return Observation(step=number, output=output, written=True, files={output: output.encode()}, program="pass\n")


def test_a_reset_forgets_the_step_and_every_step_reading_it_and_keeps_the_rest() -> None:
    steps = [step(1, "a.csv"), step(2, "b.csv"), step(3, "c.csv", ["a.csv"]), step(4, "d.csv", ["c.csv"])]
    state = PlanState(steps=steps)
    state.verified = {s.output: Verified(s, observed(s.number, s.output)) for s in steps}
    state.reset({"a.csv"})
    assert state.verified_numbers() == [2]
    assert state.next_step() == steps[0]
    assert state.carried(steps[3]) == {"b.csv": b"b.csv"}  # only verified outputs travel to later steps


def test_a_changed_step_is_no_longer_verified_even_under_the_same_output() -> None:
    first = step(1, "a.csv", intent="read a")
    state = PlanState(steps=[first])
    state.verified["a.csv"] = Verified(first, observed(1, "a.csv"))
    state.steps = [step(1, "a.csv", intent="read a, deduplicated")]
    assert state.verified_numbers() == [] and state.next_step() == state.steps[0]


def test_the_composed_program_runs_each_step_in_turn_and_a_zero_exit_lets_the_next_run(tmp_path: Path) -> None:
    programs = [
        (step(1, "a.txt"), "import sys\nopen('a.txt', 'w').write('A')\nsys.exit(0)\n"),
        (
            step(2, "b.txt", ["a.txt"], intent="it's got 'quotes' and \"more\""),
            "x = open('a.txt').read()\nopen('b.txt', 'w').write(x + 'B')\n",
        ),
    ]
    program = compose(programs)
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "b.txt").read_text() == "AB"
    failing = compose([(step(1, "a.txt"), "raise SystemExit(3)\n"), programs[1]])
    done = subprocess.run([sys.executable, "-c", failing], cwd=tmp_path, capture_output=True, timeout=60)
    assert done.returncode == 3
    assert compose([]) == ""
