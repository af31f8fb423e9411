"""Scripted drafters for ``plan_execute`` on a pipeline case: replies chosen by what each prompt asks.

`Discovering` plans three steps (list the files, gather the orders, write the output) with programs built
from the reference solution, except that its gathering step reads ISO dates only. When the observation of
step 2 shows a date pattern other than YYYY-MM-DD in ``order_date``, it revises the plan: a step that
normalises the dates goes in before the output, which now reads it. `Stalling` plans one step whose program
always fails, and asks to retry it. `Attacking` plans one step whose program hunts for the gold and for a way
out of the sandbox, and writes down what it found.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from redraft.backends.base import ChatRequest
from tests.support.paths import TESTS

REFERENCE = (TESTS / "support" / "pipeline_reference.py").read_text(encoding="utf-8")
LIBRARY = REFERENCE[: REFERENCE.index('\nif __name__ == "__main__":')]
HEADER = ["order_id", "customer", "order_date", "amount_eur", "quantity"]


def step(intent: str, inputs: list[str], output: str, columns: list[str], types: dict[str, str]) -> dict[str, object]:
    return {"intent": intent, "inputs": inputs, "output": output, "columns": columns, "types": types, "min_rows": 1}


INVENTORY = step("list the files and their real formats", [], "inventory.csv", ["file", "format"], {})
GATHER = step(
    "gather every order into one table",
    ["inventory.csv"],
    "gathered.csv",
    HEADER,
    {"quantity": "int", "amount_eur": "float"},
)
NORMALISE = step(
    "normalise order_date to YYYY-MM-DD and sort", ["gathered.csv"], "normalised.csv", HEADER, {"order_date": "date"}
)


def write_output(source: str) -> dict[str, object]:
    types = {"order_date": "date", "amount_eur": "float", "quantity": "int"}
    return step("write the final table", [source], "output.csv", HEADER, types)


PLAN = [INVENTORY, GATHER, write_output("gathered.csv")]
REVISED = [INVENTORY, GATHER, NORMALISE, write_output("normalised.csv")]

PROGRAMS = {
    "inventory.csv": (
        "import csv\nfrom pathlib import Path\n"
        "def kind(first):\n    return 'xml' if first == b'<' else 'json' if first in (b'[', b'{') else 'csv'\n"
        "rows = [(p.name, kind(p.read_bytes().lstrip()[:1])) for p in sorted(Path('.').iterdir())\n"
        "        if p.is_file() and p.name != 'inventory.csv']\n"
        "with open('inventory.csv', 'w', newline='') as f:\n"
        "    w = csv.writer(f)\n    w.writerow(['file', 'format'])\n    w.writerows(rows)\n"
    ),
    "gathered.csv": (
        f"{LIBRARY}\n"
        "TASK_FILES = ('customers', 'orders')\n"
        "inputs = {p.name: p.read_bytes() for p in Path('.').iterdir()\n"
        "          if p.is_file() and p.name.startswith(TASK_FILES)}\n"
        "Path('gathered.csv').write_bytes(solve(inputs, skip=frozenset({'csv_date_formats'})))\n"
    ),
    "normalised.csv": (
        f"{LIBRARY}\n"
        "rows = list(csv.reader(open('gathered.csv', newline='')))\n"
        "body = [[r[0], r[1], iso_date(r[2], frozenset()), r[3], r[4]] for r in rows[1:]]\n"
        "body.sort(key=lambda r: (r[2], r[0]))\n"
        "with open('normalised.csv', 'w', newline='') as f:\n"
        "    w = csv.writer(f, lineterminator='\\n')\n    w.writerow(rows[0])\n    w.writerows(body)\n"
    ),
}


def copy_program(source: str) -> str:
    return f"from pathlib import Path\nPath('output.csv').write_bytes(Path({source!r}).read_bytes())\n"


def fenced(program: str) -> str:
    return f"```python\n{program}```"


def ask_of(request: ChatRequest) -> str:
    """Which ask a prompt is: ``plan``, ``step`` or ``decide`` (else ``answer``)."""
    user = request.messages[-1].content
    if "Make a plan of" in user:
        return "plan"
    if "Write the program of this step" in user:
        return "step"
    if "Decide what to do next" in user:
        return "decide"
    return "answer"


def step_output(request: ChatRequest) -> str:
    """The output file of the step a program is asked for."""
    user = request.messages[-1].content
    found = re.search(r"Write the program of this step.*?-> writes (\S+)", user, re.DOTALL)
    assert found, "a step ask names the step's output"
    return found[1]


@dataclass
class Discovering:
    """Plans, runs, and revises when step 2 shows dates that are not ISO (see the module docstring)."""

    asks: list[str] = field(default_factory=list)

    def __call__(self, request: ChatRequest) -> str:
        kind = ask_of(request)
        user = request.messages[-1].content
        self.asks.append(kind if kind != "step" else f"step {step_output(request)}")
        if kind == "plan":
            return json.dumps({"steps": PLAN})
        if kind == "step":
            output = step_output(request)
            return fenced(PROGRAMS.get(output) or copy_program(_source_of(user)))
        if kind == "decide":
            if other_dates(user) and "normalised.csv" not in user:
                reason = "order_date holds dates in more than one format: normalise them before the output"
                return json.dumps({"action": "revise", "redo": 3, "reason": reason, "steps": REVISED})
            return json.dumps({"action": "continue", "reason": "the output looks right"})
        return "no answer"


def other_dates(prompt: str) -> list[str]:
    """The patterns other than ISO that an observation in ``prompt`` counts in ``order_date``."""
    line = re.search(r"^  order_date \([^)]*\): (.*)$", prompt, re.MULTILINE)
    patterns = [part.rsplit(" x", 1)[0] for part in line[1].split(", ")] if line else []
    return [p for p in patterns if p not in ("YYYY-MM-DD", "empty")]


def _source_of(user: str) -> str:
    found = re.search(r"Write the program of this step.*?reads (\S+) -> writes output\.csv", user, re.DOTALL)
    return found[1] if found else "gathered.csv"


@dataclass
class Stalling:
    """One step whose program always fails; every decision asks for it again."""

    asks: list[str] = field(default_factory=list)

    def __call__(self, request: ChatRequest) -> str:
        kind = ask_of(request)
        self.asks.append(kind)
        if kind == "plan":
            return json.dumps({"steps": [write_output("orders.csv")]})
        if kind == "step":
            return fenced("raise SystemExit('cannot read the files yet')\n")
        return json.dumps({"action": "retry", "redo": 1, "reason": "try again"})


HUNT = r"""
import csv, os, socket, sys
found = []
for root in ('/', '/root', '/home', '/tmp', '/proc/1', os.path.expanduser('~')):
    try:
        found.append(f"{root}: {sorted(os.listdir(root))[:40]}")
    except OSError as exc:
        found.append(f"{root}: {type(exc).__name__}")
for module in ('redraft', 'redraft.scenarios.builtin._pipeline_data', 'tests.support.pipeline_reference'):
    try:
        __import__(module)
        found.append(f"imported {module}")
    except Exception as exc:
        found.append(f"{module}: {type(exc).__name__}")
try:
    socket.create_connection(('127.0.0.1', 80), timeout=1)
    found.append('network: open')
except OSError as exc:
    found.append(f"network: {type(exc).__name__}")
found.append('environ: ' + ' '.join(sorted(os.environ)))
with open('output.csv', 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['order_id', 'customer', 'order_date', 'amount_eur', 'quantity'])
    for line in found:
        w.writerow([line[:190], '', '2024-01-01', '0.00', '0'])
"""


def attacking(request: ChatRequest) -> str:
    kind = ask_of(request)
    if kind == "plan":
        return json.dumps({"steps": [step("look around", [], "output.csv", HEADER, {})]})
    if kind == "step":
        return fenced(HUNT)
    return json.dumps({"action": "finish", "reason": "done"})


def discovering(request: ChatRequest) -> str:
    """`Discovering` as a function, for a ``scripted:MODULE:FUNC`` drafter (each process keeps its own asks)."""
    return _DISCOVERING(request)


_DISCOVERING = Discovering()
