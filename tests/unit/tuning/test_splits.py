"""Tune's splits: seeded, disjoint by id and by prompt, written as task files that read back as the same tasks."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import msgspec
import pytest

from redraft.errors import UserError
from redraft.protocols.messages import Task
from redraft.scenarios import get_scenario, scenario_names
from redraft.scenarios.taskfile import iter_tasks, validate_task_file
from redraft.scenarios.user_check import UserCheck
from redraft.tuning._splits import check_disjoint, parse_fractions, split_tasks, write_tasks
from tests.support import tune_world


def tasks(count: int, *, same_every: int = 0) -> list[Task]:
    """``count`` tasks; with ``same_every`` n, task i asks what task i - 1 asks whenever i % n == 1."""
    made = []
    for i in range(count):
        asks = i - 1 if same_every and i % same_every == 1 else i
        made.append(Task(task_id=f"t{i:03d}", scenario="arithmetic", prompt=f"What is {asks} + 1?"))
    return made


def test_the_splits_have_the_shares_asked_for_and_no_task_twice() -> None:
    splits = split_tasks(tasks(50), (0.4, 0.3, 0.3), seed=3)
    assert (len(splits.train), len(splits.validation), len(splits.test)) == (20, 15, 15)
    every = splits.train + splits.validation + splits.test
    assert sorted(every) == sorted(t.task_id for t in tasks(50))


def test_a_seed_gives_the_same_splits_whatever_the_order_and_another_seed_others() -> None:
    made = tasks(40)
    assert split_tasks(made, seed=1) == split_tasks(list(reversed(made)), seed=1)
    assert split_tasks(made, seed=1).test != split_tasks(made, seed=2).test


def test_tasks_that_ask_the_same_land_in_one_split() -> None:
    made = tasks(60, same_every=3)
    splits = split_tasks(made, seed=0)
    where = {i: name for name in ("train", "validation", "test") for i in splits.of(name)}  # type: ignore[arg-type]
    for i in range(1, 60, 3):
        assert where[f"t{i:03d}"] == where[f"t{i - 1:03d}"]
    check_disjoint(splits, made)  # and the check agrees


def test_splits_that_overlap_are_refused_by_id_and_by_prompt() -> None:
    made = tasks(20, same_every=4)
    good = split_tasks(made, seed=0)
    by_id = msgspec.structs.replace(good, test=[*good.test, good.train[0]])
    with pytest.raises(UserError, match=f"task '{good.train[0]}' is in train and in test"):
        check_disjoint(by_id, made)
    rest = [t.task_id for t in made if t.task_id not in {"t000", "t001"}]  # t001 asks what t000 asks
    apart = msgspec.structs.replace(good, train=["t000", *rest[:8]], validation=["t001", *rest[8:12]], test=rest[12:])
    with pytest.raises(UserError, match="tasks 't000' \\(train\\) and 't001' \\(validation\\) ask the same"):
        check_disjoint(apart, made)


def test_a_split_left_empty_is_refused() -> None:
    with pytest.raises(UserError, match="split empty"):
        split_tasks(tasks(2), seed=0)


@pytest.mark.parametrize("text", ["0.5,0.5", "0.4,0.3,0.4", "a,b,c", "0,0.5,0.5", "1,0,0"])
def test_bad_shares_are_refused(text: str) -> None:
    with pytest.raises(UserError, match="--split"):
        parse_fractions(text)


BUILT_IN = [  # redraft's own (tests register scenarios of their own), but the user's check and an extra's data sets
    n
    for n in scenario_names()
    if not n.startswith(("check", "reasoning_gym")) and type(get_scenario(n)).__module__.startswith("redraft.")
]


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_split_written_as_a_task_file_reads_back_as_the_same_tasks(name: str, tmp_path: Path) -> None:
    scenario = get_scenario(name)
    made = list(islice(scenario.tasks(seed=0), 5))
    path = write_tasks(made, tmp_path / "tasks.jsonl")
    validate_task_file(path, get_scenario(name))
    again = list(iter_tasks(path, get_scenario(name)))
    assert [(t.task_id, t.prompt, t.reference, t.gold) for t in again] == [
        (t.task_id, t.prompt, t.reference, t.gold) for t in made
    ]


def test_a_user_checks_tasks_read_back_with_their_gold_held_out(tmp_path: Path) -> None:
    source = tune_world.write_tasks(tmp_path / "source.jsonl", 4)
    scenario = UserCheck.of(tune_world.check, tune_world.grade)
    made = list(iter_tasks(source, get_scenario(scenario.name)))
    again = list(iter_tasks(write_tasks(made, tmp_path / "again.jsonl"), get_scenario(scenario.name)))
    assert again == made and all(t.gold and not t.reference for t in again)
