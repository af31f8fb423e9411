"""No gold a candidate can rebuild: a run's pipeline cases are keyed by the secret its directory keeps.

The attack (`tests.support.gold_rebuilder`): a program that embeds the public generator and tries seeds
0-3 rebuilds the gold table of a case made from a guessable seed alone; under a run's secret it finds
nothing, in the real sandbox. A rerun of the directory reads the same secret (the same gold), a new
directory draws new gold, a comparison's lanes share the comparison's secret.
"""

from __future__ import annotations

import stat
from itertools import islice
from pathlib import Path

import pytest

from redraft import RunConfig
from redraft.comparison import ComparePlan, arms_from_names
from redraft.engine.resolution import resolve_run
from redraft.errors import UserError
from redraft.protocols.messages import Task
from redraft.rundir import RunSecret
from redraft.scenarios import get_scenario
from tests.support.gold_rebuilder import rebuilder_program

PIPELINE = get_scenario("pipeline")
LIMIT = 6
ATTACK = rebuilder_program(LIMIT)


def run_tasks(out: Path, limit: int = LIMIT) -> list[Task]:
    return list(resolve_run(RunConfig.build(scenario="pipeline", limit=limit, max_tokens=1024, out=str(out))).tasks())


def graded_passes(tasks: list[Task]) -> int:
    grades = [PIPELINE.grade(task, ATTACK) for task in tasks]
    assert all(grade is not None for grade in grades)
    return sum(bool(grade and grade.passed) for grade in grades)


def test_the_attack_rebuilds_guessable_gold_and_passes_nothing_under_a_runs_secret(tmp_path: Path) -> None:
    public = list(islice(PIPELINE.tasks(seed=0), 2))  # the attack is real: a seed alone gives the gold away
    assert graded_passes(public) == 2
    kept = run_tasks(tmp_path / "run")
    assert graded_passes(kept) == 0
    feedback = PIPELINE.check(kept[0], ATTACK)
    assert not all(c.passed for c in feedback) and "no case of a guessable seed" not in str(feedback)


def test_a_rerun_reads_the_same_secret_and_a_new_directory_draws_new_gold(tmp_path: Path) -> None:
    first = run_tasks(tmp_path / "run", limit=4)
    secret = tmp_path / "run" / "secret"
    assert len(secret.read_bytes()) == 32 and stat.S_IMODE(secret.stat().st_mode) == 0o600
    again = run_tasks(tmp_path / "run", limit=4)
    assert [t.gold for t in again] == [t.gold for t in first] and [t.prompt for t in again] == [t.prompt for t in first]
    other = run_tasks(tmp_path / "other", limit=4)
    assert not {str(t.gold) for t in other} & {str(t.gold) for t in first}
    assert [t.task_id for t in other] == [t.task_id for t in first]


def test_the_secret_reaches_no_task_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    tasks = run_tasks(tmp_path / "run", limit=4)
    secret = (tmp_path / "run" / "secret").read_bytes()
    for task in tasks:
        shown = [task.prompt.encode(), str(task.reference).encode(), str(task.gold).encode()]
        shown += list(PIPELINE.workspace(task).values())  # what its sandbox's work directory holds
        assert not any(secret in s or secret.hex().encode() in s for s in shown)
    (tmp_path / "run" / "secret").write_bytes(b"short")
    with pytest.raises(UserError, match="holds 5 bytes, not a run's secret"):
        run_tasks(tmp_path / "run")
    (tmp_path / "run" / "secret").unlink()
    (tmp_path / "run" / "results.jsonl").write_text("{}\n")  # tasks done: a new secret would change the rest
    with pytest.raises(UserError, match="holds a run's results but not its secret"):
        run_tasks(tmp_path / "run")


def test_an_estimate_writes_no_secret_and_reads_a_kept_one(tmp_path: Path) -> None:
    passing = RunSecret(tmp_path / "new", keep=False)
    assert passing.read() == passing.read() and not (tmp_path / "new").exists()
    kept = RunSecret(tmp_path / "run").read()
    assert RunSecret(tmp_path / "run", keep=False).read() == kept
    assert repr(passing) == f"RunSecret(home={str(tmp_path / 'new')!r}, keep=False)"  # never the bytes


def test_a_comparisons_lanes_share_the_comparisons_secret(tmp_path: Path) -> None:
    base = RunConfig.build(scenario="pipeline", limit=3, max_tokens=1024)
    plan = ComparePlan(base=base, arms=arms_from_names("self_refine,adversarial"), out=tmp_path / "cmp")
    golds = [[t.gold for t in resolved.tasks()] for _, resolved in plan.resolved()]
    assert len(golds) == 3 and all(g == golds[0] for g in golds)
    assert (tmp_path / "cmp" / "secret").exists()
