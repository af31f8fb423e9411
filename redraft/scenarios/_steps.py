"""One step of a plan, run for real: its program in the sandbox over the task's files and the verified outputs
of earlier steps; the step's contract checked on the file it wrote; a profile of that file.

The profile is what a step's next decision sees of the data: rows, each column's likely type and how many cells
follow each value pattern (``YYYY-MM-DD`` against ``DD.MM.YYYY``, ``1234.5`` against ``1,234.5``), a few rows.
Two date formats in one column, or numbers with thousands separators, show there before any contract names them.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter

import msgspec

from redraft.protocols.messages import CheckResult, ColumnProfile, Observation, StepContract, StepRun
from redraft.sandbox import SandboxLimits, SandboxResult, run_python

STDERR_CHARS = 600
SAMPLE_ROWS = 3
SAMPLE_CELL_CHARS = 40
MAX_PATTERNS = 6
"""Value patterns listed per column, the most frequent first (the rest counted as ``other``)."""
_FENCE = re.compile(r"```[ \t]*(\w*)[^\n]*\n(.*?)```", re.DOTALL)
_CODE_START = re.compile(r"^(?:#|import |from \S+ import |def |class |with |for |if |print\(|\w+ = )")
_TYPES: dict[str, re.Pattern[str]] = {
    "int": re.compile(r"[+-]?\d{1,18}"),
    "float": re.compile(r"[+-]?\d{1,18}\.\d{1,12}"),
    "date": re.compile(r"\d{4}-\d{2}-\d{2}"),
}


def script_of(text: str) -> str:
    """The program in a reply: its last ```python block (else its last fenced block), else the whole text if
    it starts as a program does; else nothing."""
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    python = [body for tag, body in blocks if tag in ("python", "py", "python3")]
    chosen = python or [body for _, body in blocks]
    if chosen:
        return str(chosen[-1])
    first = next((line for line in text.splitlines() if line.strip()), "")
    return text if _CODE_START.match(first) else ""


def run_step(
    workspace: dict[str, bytes], run: StepRun, text: str, limits: SandboxLimits
) -> tuple[list[CheckResult], Observation]:
    """The checks of a step's program and what its run showed; never raises for a bad program."""
    step = run.step
    script = script_of(text)
    if not script.strip():
        detail = "no program found; answer with the step's whole program in a ```python block"
        nothing = Observation(step=step.number, output=step.output)
        return [CheckResult(name="runs", passed=False, score=0.0, detail=detail)], nothing
    files = {**workspace, **run.files}
    try:
        ran = run_python(script, limits=limits, files=files, outputs=(step.output,))
    except ValueError as exc:  # a file name the sandbox refuses, or inputs over its cap: the plan's doing
        refused = CheckResult(name="runs", passed=False, score=0.0, detail=f"the step cannot run: {exc}")
        return [refused], Observation(step=step.number, output=step.output)
    checks = [runs_check(ran)]
    data = ran.files.get(step.output)
    if data is None:
        why = ran.uncollected.get(step.output, "not written")
        checks.append(CheckResult(name="output", passed=False, score=0.0, detail=f"{step.output}: {why}"))
    observation = Observation(
        step=step.number,
        returncode=ran.returncode,
        killed=ran.kill_description or "",
        stderr_tail=ran.stderr.strip()[-STDERR_CHARS:],
        output=step.output,
        written=data is not None,
        files={step.output: data} if data is not None else {},
        program=script,
    )
    if data is None:
        return checks, observation
    header, rows = read_rows(data)
    checks += contract_checks(header, rows, step.contract)
    return checks, profile(observation, header, rows)


def read_rows(data: bytes) -> tuple[list[str], list[list[str]]]:
    """A CSV file's header and data rows (blank rows dropped); empty when it is no CSV."""
    try:
        table = [row for row in csv.reader(io.StringIO(data.decode("utf-8-sig", errors="replace"))) if row]
    except csv.Error:
        return [], []
    return (table[0], table[1:]) if table else ([], [])


def contract_checks(header: list[str], rows: list[list[str]], contract: StepContract) -> list[CheckResult]:
    """The step contract's checks: the columns, each typed column's cells, the row bound."""
    checks: list[CheckResult] = []
    if contract.columns:
        missing = [c for c in contract.columns if c not in header]
        ok = not missing and [h for h in header if h in contract.columns] == contract.columns
        detail = (
            f"columns {header}"
            if ok
            else f"missing {missing}"
            if missing
            else f"columns {header}, expected in the order {contract.columns}"
        )
        checks.append(CheckResult(name="columns", passed=ok, score=float(ok), detail=detail))
    for name, kind in contract.types.items():
        if name not in header:
            continue
        at = header.index(name)
        cells = [row[at] if at < len(row) else "" for row in rows]
        bad = [cell for cell in cells if not _is(kind, cell.strip())]
        ok = not bad
        shown = ", ".join(repr(cell[:SAMPLE_CELL_CHARS]) for cell in bad[:3])
        detail = f"every {name} cell is {kind}"
        if not ok:
            detail = f"{len(bad)} of {len(cells)} {name} cells are not {kind}: {shown}"
        score = 1.0 - len(bad) / len(cells) if cells else 1.0
        checks.append(CheckResult(name=f"type:{name}", passed=ok, score=score, detail=detail))
    n = len(rows)
    within = n >= contract.min_rows and (contract.max_rows is None or n <= contract.max_rows)
    bound = f"{contract.min_rows}..{'' if contract.max_rows is None else contract.max_rows}"
    checks.append(CheckResult(name="rows", passed=within, score=float(within), detail=f"{n} rows, bound {bound}"))
    return checks


def profile(observation: Observation, header: list[str], rows: list[list[str]]) -> Observation:
    """``observation`` with the output's rows, each column's profile and a sample of its first rows."""
    columns = []
    for at, name in enumerate(header):
        cells = [row[at].strip() if at < len(row) else "" for row in rows]
        patterns = Counter(pattern_of(cell) for cell in cells)
        top = dict(patterns.most_common(MAX_PATTERNS))
        if len(patterns) > MAX_PATTERNS:
            top["other"] = sum(patterns.values()) - sum(top.values())
        filled = [cell for cell in cells if cell]
        kinds = Counter(next((k for k in ("int", "float", "date") if _is(k, cell)), "text") for cell in filled)
        kind = kinds.most_common(1)[0][0] if kinds else "empty"
        columns.append(ColumnProfile(name=name, type=kind, patterns=top, distinct=len(set(cells))))
    sample = [[cell[:SAMPLE_CELL_CHARS] for cell in row] for row in rows[:SAMPLE_ROWS]]
    return msgspec.structs.replace(observation, rows=len(rows), columns=columns, sample=sample)


def pattern_of(cell: str) -> str:
    """A cell's shape: digits as 9 (runs of them by their usual names for dates), letters as a, the rest kept.

    ``2024-03-05`` -> ``YYYY-MM-DD``, ``05.03.2024`` -> ``DD.MM.YYYY``, ``1,234.50`` -> ``9,999.99``,
    ``ORD-0042`` -> ``aaa-9999``; an empty cell -> ``empty``.
    """
    if not cell:
        return "empty"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", cell):
        return "YYYY-MM-DD"
    if re.fullmatch(r"\d{2}[./]\d{2}[./]\d{4}", cell):
        return f"DD{cell[2]}MM{cell[5]}YYYY"
    if re.fullmatch(r"\d{8}", cell):
        return "YYYYMMDD"
    shape = re.sub(r"[^\W\d_]", "a", re.sub(r"\d", "9", cell))
    shape = re.sub(r"9{5,}", "9…9", re.sub(r"a{4,}", "a…a", shape))
    return shape[:24]


def _is(kind: str, cell: str) -> bool:
    if kind == "text":
        return True
    if kind == "float":
        return bool(_TYPES["float"].fullmatch(cell) or _TYPES["int"].fullmatch(cell))
    return bool(_TYPES[kind].fullmatch(cell))


def runs_check(ran: SandboxResult) -> CheckResult:
    """Whether a program ran and exited 0; else how it ended, with the end of its stderr."""
    if ran.ok:
        return CheckResult(name="runs", passed=True, score=1.0, detail="the program ran and exited 0")
    how = ran.kill_description or f"exited {ran.returncode}"
    tail = ran.stderr.strip()[-STDERR_CHARS:]
    return CheckResult(name="runs", passed=False, score=0.0, detail=f"{how}: {tail}" if tail else how)
