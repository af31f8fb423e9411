"""The embedded model as a judge: its card against a scenario's program grade, in one command.

For ``arithmetic`` or ``incident``, it

1. has the embedded model answer the scenario's first ``--tasks`` tasks (``redraft run``, one draft a task,
   once per ``--repeats``, each repeat its own sampling seed);
2. adds, per task, an answer written from the task's gold and one with a single fact wrong (arithmetic: the
   number off by one; incident: the failed-request count changed), so the labels are not all one verdict: the
   embedded model alone passes a few percent of arithmetic and none of incident;
3. writes the answers (no labels: the scenario's program grade labels each one) and measures the embedded
   model's card on them with ``redraft judge calibrate --scenario NAME`` (arithmetic by the rubric below;
   incident by its own), printing the card and writing it under ``--out``.

Run: ``python benchmarks/judge_cards.py arithmetic --tasks 8 --repeats 2`` (or ``incident --tasks 4``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests

ARITHMETIC_RUBRIC = """\
threshold = 1.0

[[criteria]]
name = "correct"
weight = 2
description = "The final line's number is the value the word problem asks for."
[[criteria.levels]]
name = "right"
score = 1.0
description = "The number after 'Answer:' is the problem's correct value."
[[criteria.levels]]
name = "wrong"
score = 0.0
description = "The number is not the correct value, or there is no final 'Answer:' line."
"""
MAX_TOKENS = {"arithmetic": 160, "incident": 200}


def redraft(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "redraft.cli", *args], check=True)


def written(scenario: str, task_id: str) -> list[str]:
    """An answer written from the task's gold, then the same with one fact wrong."""
    from redraft.scenarios import get_scenario

    task = next(t for t in get_scenario(scenario).tasks(seed=0) if t.task_id == task_id)
    if scenario == "arithmetic":
        value = task.gold["answer"]
        return [f"The problem's steps give {n}.\nAnswer: {n}" for n in (value, value + 1)]
    from tests.unit.scenarios.test_incident import incident_of, summary_of

    incident = incident_of(task)
    right, failed = summary_of(incident), incident.failed_requests
    return [right, right.replace(f"{failed} failed requests", f"{failed * 2 + 7} failed requests")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=sorted(MAX_TOKENS))
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1, help="the embedded model's answers per task")
    parser.add_argument("--out", type=Path, default=Path("runs/judge-cards"))
    args = parser.parse_args()
    out: Path = args.out / args.scenario
    out.mkdir(parents=True, exist_ok=True)
    answers: dict[str, list[str]] = {}
    for repeat in range(args.repeats):
        run = out / f"answers-{repeat}"
        limit, tokens = str(args.tasks), str(MAX_TOKENS[args.scenario])
        one_draft = ["--samples", "1", "--max-rounds", "1", "--max-tokens", tokens, "--repeat", str(repeat)]
        redraft("run", args.scenario, "--limit", limit, *one_draft, "--out", str(run))
        for line in (run / "results.jsonl").read_text().splitlines():
            record = json.loads(line)
            answers.setdefault(record["task_id"], []).append(record["text"] or "")
    lines = [
        json.dumps({"task_id": task_id, "answers": [{"text": t} for t in [*given, *written(args.scenario, task_id)]]})
        for task_id, given in sorted(answers.items())
    ]
    (out / "answers.jsonl").write_text("\n".join(lines) + "\n")
    rubric = []
    if args.scenario == "arithmetic":
        (out / "arithmetic-rubric.toml").write_text(ARITHMETIC_RUBRIC)
        rubric = ["--rubric", str(out / "arithmetic-rubric.toml")]
    calibrate = ["judge", "calibrate", "--tasks", str(out / "answers.jsonl"), "--scenario", args.scenario]
    result = subprocess.run(
        [sys.executable, "-m", "redraft.cli", *calibrate, "--judge", "local", *rubric, "--out", str(out / "card")]
    )
    print(f"exit {result.returncode} (5: the card failed)")


if __name__ == "__main__":
    main()
