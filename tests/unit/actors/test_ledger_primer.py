"""What a resumed adaptive run's ledger is rebuilt from: the finished tasks' calls and what each left in the bank,
read from a run directory written by the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from redraft.actors._ledger import primer
from redraft.protocols.messages import DraftRequest, Verification
from redraft.rundir import KnownFrame, RunReader
from redraft.strategies import Ledger, Share
from tests.support.report_runs import make_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("primer") / "run", strategy="adaptive")


def test_the_primer_reads_each_judged_call_once_and_each_finished_tasks_deposit(run_dir: Path) -> None:
    entries = {entry.task_id: (entry, frames) for entry, frames in RunReader(run_dir).tasks()}
    done = {task_id for task_id, (entry, _) in entries.items() if entry.result.error is None}
    observations, settled = primer(RunReader(run_dir).tasks(), done, Share(6.0))
    assert settled == {t: 6.0 - entries[t][0].result.usage.calls for t in done}
    _, in_tokens = primer(RunReader(run_dir).tasks(), done, Share(900.0, "tokens"))
    assert in_tokens == {t: 900.0 - entries[t][0].result.usage.total_tokens for t in done}
    assert any(entries[t][0].result.usage.total_tokens != entries[t][0].result.usage.calls for t in done)
    judged = []
    for task_id in done:
        frames = [f.message for f in entries[task_id][1] if isinstance(f, KnownFrame)]
        scores = {(m.round, m.sample): m.score for m in frames if isinstance(m, Verification) and m.stage is None}
        for m in frames:
            if (
                isinstance(m, DraftRequest)
                and m.intent
                and m.intent.best_score is not None
                and (m.round, m.sample) in scores
            ):
                judged.append((f"{task_id}/{m.round}/{m.sample}", scores[(m.round, m.sample)] > m.intent.best_score))
    assert sorted((o.key, o.improved) for o in observations) == sorted(judged) and judged
    assert primer(RunReader(run_dir).tasks(), set(), Share(6.0)) == ([], {})  # nothing finished: nothing
    ledger = Ledger(observations, settled)
    assert ledger.balance() == sum(settled.values())
    assert sum(t.tries for t in ledger.table().values()) == len(judged)
