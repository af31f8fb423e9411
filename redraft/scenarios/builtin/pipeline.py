"""Data pipelines from messy files: a program that turns a task's files into the table its contract states.

The drafter answers with a Python script (standard library only). The **feedback** runs it in the
sandbox over the task's files (the only files it has: the gold never enters it) and reads back the
``output.csv`` it wrote: whether it ran (exit status, the end of stderr) and the contract's checks
(columns, types, ISO dates, the key, the order, the row bound, the two or three example rows the
prompt shows). The **grade**, held out, runs it again the same way and compares the table with the
gold, key-aligned, typed, cell by cell with tolerance (`redraft.scenarios.builtin._pipeline_grade`), and
says which quirks the table handled. The task carries the gold as the case's seed and difficulty,
which the grader alone turns back into the gold table. A candidate cannot: the sandbox hides redraft's
code and every installed package from it, and a program that embeds the generator (standard library
only, public) and tries seeds finds no case, since each case's seed is a keyed hash of the run's seed
and the task's index under the secret its run directory keeps (`Scenario.hides_gold`), which it never
sees. ``tasks(seed=...)`` alone, with no secret, makes the public cases: for tests and examples.

See docs/architecture.md, section "Pipelines: the tasks".
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import msgspec

from redraft.protocols.messages import CheckResult, Task
from redraft.sandbox import SandboxLimits, SandboxResult, run_python
from redraft.scenarios import Scenario, scenario
from redraft.scenarios._steps import runs_check, script_of
from redraft.scenarios.builtin._pipeline_data import Contract, make_case, prompt_text
from redraft.scenarios.builtin._pipeline_grade import contract_checks, grade_table

TASKS = 200
DEFAULT_LIMITS = SandboxLimits(timeout_s=10.0, cpu_s=10, memory_mb=512, max_collect_bytes=2_000_000)
OUTPUT = "output.csv"

INSTRUCTIONS = (
    "Write one Python 3 program, standard library only, that reads the input files from its working "
    f"directory and writes {OUTPUT} there, exactly as the contract says. Look at what the files really "
    "hold before you trust their names: formats, date styles, units and duplicates may differ from what "
    "you expect."
)


@scenario("pipeline")
class Pipeline(Scenario):
    """Messy order files into one clean table: feedback by running the program on them, graded against the gold."""

    check_cost = "executes"  # each check runs the candidate's program in the sandbox
    hides_gold = True  # the program could embed make_case and try seeds: each case is keyed by the run's secret
    draft_tokens = 1024  # a program over the files
    feedback_keys = frozenset({"files", "contract"})
    has_workspace = True

    def __init__(self, limits: SandboxLimits = DEFAULT_LIMITS) -> None:
        self.limits = self.step_limits = limits

    def tasks(self, *, seed: int) -> Iterator[Task]:
        return self.secret_tasks(seed=seed, secret=b"")

    def secret_tasks(self, *, seed: int, secret: bytes) -> Iterator[Task]:
        for index in range(TASKS):
            difficulty = index % 4 + 1
            case_seed = int.from_bytes(
                hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8, key=secret).digest(), "big"
            )
            case = make_case(case_seed, difficulty)
            yield Task(
                task_id=f"pipeline-{index:03d}",
                scenario=self.name,
                prompt=f"{prompt_text(case)}\n\n{INSTRUCTIONS}",
                reference={
                    "files": {name: data.decode("utf-8") for name, data in case.files.items()},
                    "contract": msgspec.json.decode(msgspec.json.encode(case.contract)),  # as a frame reads it
                },
                gold={"seed": case_seed, "difficulty": difficulty},
            )

    def system_prompt(self) -> str:
        return (
            "You are a careful data engineer. You write Python 3 programs that use only the standard library "
            "(csv, json, xml.etree.ElementTree, datetime, decimal, re). Answer with the whole program in a "
            "single ```python fenced block; no explanation is needed."
        )

    def answer(self, text: str) -> str | None:
        lines = [line.rstrip() for line in script_of(text).splitlines()]
        return "\n".join(line for line in lines if line) or None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        ran = self._run(task, text)
        if isinstance(ran, CheckResult):
            return [ran]
        runs = runs_check(ran)
        if OUTPUT not in ran.files:
            why = ran.uncollected.get(OUTPUT, "not written")
            return [runs, CheckResult(name="output", passed=False, score=0.0, detail=f"{OUTPUT}: {why}")]
        contract = msgspec.convert(task.reference["contract"], Contract)
        return [runs, *contract_checks(ran.files[OUTPUT], contract)]

    def grade(self, task: Task, text: str) -> CheckResult | None:
        if "seed" not in task.gold:
            return None
        ran = self._run(task, text)
        if isinstance(ran, CheckResult):
            return CheckResult(name="table", passed=False, score=0.0, detail=ran.detail)
        if OUTPUT not in ran.files:
            why = ran.uncollected.get(OUTPUT, "not written")
            return CheckResult(name="table", passed=False, score=0.0, detail=f"{OUTPUT}: {why}")
        case = make_case(int(task.gold["seed"]), int(task.gold["difficulty"]))
        return grade_table(ran.files[OUTPUT], case).as_check()

    def _run(self, task: Task, text: str) -> SandboxResult | CheckResult:
        """The program's run over the task's files, or a failed ``runs`` check when the reply holds none."""
        script = script_of(text)
        if not script.strip():
            detail = "no program found; answer with the whole program in a ```python block"
            return CheckResult(name="runs", passed=False, score=0.0, detail=detail)
        return run_python(script, limits=self.limits, files=self.workspace(task), outputs=(OUTPUT,))

    def workspace(self, task: Task) -> dict[str, bytes]:
        return {name: str(data).encode("utf-8") for name, data in dict(task.reference["files"]).items()}
