"""A run is resolved once: each file it names is read once, and what follows from its roles (the cast) is worked
out once, as a field of the resolved run, which every reader then takes."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig
from redraft.actors import _factory as factory
from redraft.backends import pricing
from redraft.backends.scripted import ScriptedSpec
from redraft.engine.estimate import WORST, costing_roles
from redraft.engine.resolution import Cast, ResolvedRun, resolve_run
from redraft.engine.resolution import _cast as cast_module
from redraft.engine.resolution import _money as money_module
from tests.support.judges import RUBRIC

CHEAP = ScriptedSpec(script=["Answer: 4"], model="cheap")
STRONG = ScriptedSpec(script=["Answer: 4"], model="strong")
PROMPTS = '[draft_task]\nversion = 7\ntext = """Solve it, fenced as given.\n$task"""\n'


@pytest.fixture
def named_files(tmp_path: Path) -> dict[str, Path]:
    files = {"prices": tmp_path / "prices.json", "prompts": tmp_path / "mine.toml"}
    files["prices"].write_text(json.dumps({"cheap": {"input": 1, "output": 2}, "strong": {"input": 10, "output": 20}}))
    files["prompts"].write_text(PROMPTS)
    return files


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every file opened while the test runs, by path (`Path.read_bytes` and `Path.read_text` open through it)."""
    opened: Counter[str] = Counter()
    real = io.open

    def counting(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened[str(file)] += 1
        return real(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(builtins, "open", counting)
    yield opened


def resolved(files: dict[str, Path], tmp_path: Path) -> ResolvedRun:
    """A run whose money reaches every reader of the price table: a budget in money, and an escalation."""
    config = RunConfig.build(
        scenario="arithmetic",
        strategy="adaptive",
        usd_per_task=0.5,
        escalate="strong",
        prices=str(files["prices"]),
        prompts=str(files["prompts"]),
        out=str(tmp_path / "run"),
    )
    return resolve_run(config, backends={"drafter": CHEAP, "critic": CHEAP, "escalate": STRONG})


def test_every_file_a_run_names_is_read_once_and_the_price_table_loaded_once(
    named_files: dict[str, Path], tmp_path: Path, reads: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[object] = []
    real = pricing.load_prices
    monkeypatch.setattr(money_module, "load_prices", lambda path: loads.append(path) or real(path))
    run = resolved(named_files, tmp_path)
    assert loads == [str(named_files["prices"])]
    assert {name: reads[str(path)] for name, path in named_files.items()} == {"prices": 1, "prompts": 1}
    assert run.settings.escalation is not None and run.settings.escalation.escalated_usd == (10.0, 20.0)
    assert run.settings.prices.known("strong")  # the table read once is the one the run's readers take


def test_the_cast_is_worked_out_once_and_read_by_the_factory_and_the_estimate(
    named_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Cast] = []
    real = Cast.of.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Cast], *args: Any) -> Cast:
        made.append(cast := real(cls, *args))
        return cast

    monkeypatch.setattr(cast_module.Cast, "of", classmethod(counting))
    run = resolved(named_files, tmp_path)
    assert made == [run.cast]
    assert set(run.cast.roles) == {"drafter", "verifier", "critic"}
    assert run.cast.endpoints["drafter"] == CHEAP.spec and run.cast.verifier_model is None
    assert run.settings.paced_roles == run.cast.paced == frozenset()
    roles, local = factory.run_roles("run", run.cast)  # Ray is not asked
    assert {**roles, **local}.keys() == run.cast.roles.keys()
    assert len(made) == 1  # the factory reads the cast; it works nothing out again
    paying = run.with_setup(payer="run-1")  # a setup changed: its cast is made anew, once, from it
    assert len(made) == 2 and paying.cast.roles["drafter"][1][2].payer == "run-1"
    costing_roles(run, WORST)
    assert len(made) == 3  # the estimate's doubles are a setup of their own, cast once


def _task_file(path: Path) -> Path:
    """Two arithmetic tasks, as the file's suffix says (JSON lines, CSV or Parquet)."""
    records = [
        {"id": "apples", "prompt": "3 apples and 4 more?", "reference.answer": "7"},
        {"id": "pears", "prompt": "9 pears less 2?", "reference.answer": "7"},
    ]
    if path.suffix == ".jsonl":
        lines = [json.dumps({"id": r["id"], "prompt": r["prompt"], "reference": {"answer": 7}}) for r in records]
        path.write_text("\n".join(lines) + "\n")
    elif path.suffix == ".csv":
        rows = [",".join(records[0]), *(",".join(r.values()) for r in records)]
        path.write_text("\r\n".join(rows) + "\r\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records), path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_task_file_and_a_rubric_are_each_opened_once_and_hashed_from_that_read(
    suffix: str, tmp_path: Path, reads: Counter[str]
) -> None:
    tasks, rubric = _task_file(tmp_path / f"tasks{suffix}"), tmp_path / "rubric.json"
    rubric.write_text(json.dumps(RUBRIC))
    config = RunConfig.build(
        scenario="arithmetic", tasks=str(tasks), judge="openai:gpt-4o", rubric=str(rubric), out=str(tmp_path / "run")
    )
    reads.clear()  # what writing them opened
    run = resolve_run(config, backends={"drafter": CHEAP, "critic": CHEAP, "judge": STRONG})
    assert {"tasks": reads[str(tasks)], "rubric": reads[str(rubric)]} == {"tasks": 1, "rubric": 1}
    assert run.identity["tasks"] == {"path": str(tasks), "sha256": hashlib.sha256(tasks.read_bytes()).hexdigest()}
    assert run.identity["rubric"] == {"path": str(rubric), "sha256": hashlib.sha256(rubric.read_bytes()).hexdigest()}
    assert [task.task_id for task in run.tasks()] == ["apples", "pears"]  # streamed afresh, from a read of its own
