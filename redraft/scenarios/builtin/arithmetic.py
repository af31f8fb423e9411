"""Seeded multi-step word problems with exact integer answers, checked the way a careful user would.

Each problem is a start quantity followed by two gains or losses; the gold answer
is computed exactly, and the task list depends only on the seed.

Feedback (`check`) never sees the gold. It is what a user with a calculator has:

- ``answer_line``: the draft ends with ``Answer: <integer>``;
- ``steps``: every equation the draft writes (``7 + 5 = 12``, ``12 - 3 = 9``,
  ``4 × 3 = 12``, chains too) is recomputed, and a wrong one is named (tool-
  checked reasoning, as in CRITIC and program-of-thought; the right value is
  left to the model, so no number the loop sees comes from the checker);
  writing no equation at all fails, since nothing could be checked;
- ``grounded``: every number a step uses is one of the problem's numbers or the
  result of an earlier step (a step on invented numbers is named);
- ``answer_follows``: the final answer is the result of the last step.

Agreement across samples stays the arbiter's tie-break. The grade (`grade`) is
the gold integer, held out.
"""

from __future__ import annotations

import ast
import operator
import random
import re
from collections.abc import Callable, Iterator

from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios import Scenario, scenario

SIZE = 1000
STEPS = 2
_NAMES = ["Mia", "Tom", "Ava", "Leo", "Zoe", "Sam", "Ivy", "Max", "Nia", "Ben"]
_ITEMS = ["apples", "marbles", "stickers", "books", "coins", "pencils", "shells", "cards"]
_ANSWER = re.compile(r"answer\s*(?:is)?\s*[:=]?\s*[*'\"]*\s*(-?\d[\d,]*)", re.IGNORECASE)
_ANSWER_LINE = re.compile(r"^\W*answer\W*(?:is\W*)?(-?\d[\d,]*)[^\d\n]*$", re.IGNORECASE | re.MULTILINE)
_INTEGER = re.compile(r"-?\d[\d,]*")
_NUMBER = r"-?\d+(?:,\d{3})*(?:\.\d+)?"
_OPERATOR = r"[-+*/×x÷−]"
# ``a op b (op c ...) = c`` and chains of ``=``: a maximal run of terms joined by operators and equals signs.
_EQUATION = re.compile(rf"{_NUMBER}(?:\s*{_OPERATOR}\s*{_NUMBER})+(?:\s*=\s*{_NUMBER}(?:\s*{_OPERATOR}\s*{_NUMBER})*)+")
_SYMBOLS = {"×": "*", "x": "*", "÷": "/", "−": "-"}


def _problem(rng: random.Random) -> tuple[str, int]:
    """Two steps of gains and losses with small numbers.

    Sized for the embedded 135M model, which gets such a problem right in roughly
    one sample of twenty: hard enough that one draft usually fails, easy enough
    that the loop can find a right one.
    """
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    total = rng.randint(3, 12)
    sentences = [f"{name} has {total} {item}."]
    for _ in range(STEPS):
        if total > 2 and rng.random() < 0.5:
            n = rng.randint(1, total - 1)
            sentences.append(f"Then {name} gives away {n} {item}.")
            total -= n
        else:
            n = rng.randint(1, 10)
            sentences.append(f"Then {name} gets {n} more {item}.")
            total += n
    sentences.append(f"How many {item} does {name} have now?")
    return " ".join(sentences), total


def extract_answer(text: str) -> int | None:
    """The candidate's final integer: the last ``Answer: N``, else the last integer in the text."""
    marked = _ANSWER.findall(text)
    found = marked[-1] if marked else (_INTEGER.findall(text) or [None])[-1]
    if found is None:
        return None
    try:
        return int(found.replace(",", ""))
    except ValueError:
        return None


class Step:
    """One equation a draft wrote: its text and the value of each side (None: not computable)."""

    def __init__(self, text: str) -> None:
        self.text = " ".join(text.split())
        self.sides = [_evaluate(side) for side in text.split("=")]
        self.operands = [float(n.replace(",", "")) for n in re.findall(_NUMBER, self.sides_text(0))]

    def sides_text(self, index: int) -> str:
        return self.text.split("=")[index]

    @property
    def result(self) -> float | None:
        return self.sides[-1]

    def error(self) -> str | None:
        """Why the equation is false (its first side that is not what the first side computes to), or None."""
        first = self.sides[0]
        if first is None:
            return f"'{self.text}' cannot be computed"
        for side in self.sides[1:]:
            if side is None or abs(side - first) > 1e-9:
                return f"'{self.text}' is wrong; recompute it"
        return None


_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(expression: str) -> float | None:
    """The value of ``a op b op c`` (usual precedence, + - × ÷ only), or None if it is not such an expression."""
    tokens = re.findall(rf"{_NUMBER}|{_OPERATOR}", expression.strip())
    if not tokens or "".join(tokens) != re.sub(r"\s+", "", expression):
        return None
    program = "".join(_SYMBOLS.get(t, t).replace(",", "") for t in tokens)
    try:
        return _value(ast.parse(program, mode="eval").body)
    except (SyntaxError, ZeroDivisionError, OverflowError, ValueError):
        return None


def _value(node: ast.expr) -> float:
    """A calculator over the parsed expression: numbers, unary minus, + - * / and nothing else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return float(_BINARY[type(node.op)](_value(node.left), _value(node.right)))
    raise ValueError("not a calculator expression")


def _show(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


def steps_of(text: str) -> list[Step]:
    """Every equation in ``text``, in order."""
    return [Step(match.group(0)) for match in _EQUATION.finditer(text.replace("−", "-"))]


def check_steps(problem: str, text: str) -> list[CheckResult]:
    """The gold-free checks of a worked solution (see the module docstring)."""
    steps = steps_of(text)
    answer_lines = _ANSWER_LINE.findall(text)
    answer = int(answer_lines[-1].replace(",", "")) if answer_lines else None
    checks = [
        CheckResult(name="answer_line", passed=True, score=1.0, detail=f"the answer line gives {answer}")
        if answer is not None
        else _fail("answer_line", "no final line 'Answer: <integer>'; end with one")
    ]
    if not steps:
        detail = "no step written as an equation (like '7 + 5 = 12'); write each step so it can be checked"
        return [*checks, _fail("steps", detail), _fail("grounded", "no steps"), _fail("answer_follows", "no steps")]
    wrong = [e for step in steps if (e := step.error()) is not None]
    checks.append(
        _fail("steps", "; ".join(wrong)[:400])
        if wrong
        else CheckResult(name="steps", passed=True, score=1.0, detail=f"{len(steps)} step(s), each one right")
    )
    checks.append(_grounded(problem, steps))
    last = steps[-1].result
    if answer is not None and last is not None and abs(answer - last) < 1e-9:
        checks.append(
            CheckResult(name="answer_follows", passed=True, score=1.0, detail="the answer is the last step's")
        )
    else:
        shown = "?" if last is None else _show(last)
        checks.append(_fail("answer_follows", f"the answer {answer} is not the result of the last step ({shown})"))
    return checks


def _grounded(problem: str, steps: list[Step]) -> CheckResult:
    known = {float(n.replace(",", "")) for n in re.findall(_NUMBER, problem)}
    invented: list[str] = []
    for step in steps:
        invented += [_show(n) for n in step.operands if n not in known]
        if step.result is not None:
            known.add(step.result)
    if invented:
        detail = f"step(s) use {', '.join(dict.fromkeys(invented))}, which are not in the problem or earlier results"
        return _fail("grounded", detail)
    return CheckResult(name="grounded", passed=True, score=1.0, detail="every step uses the problem's numbers")


def _fail(name: str, detail: str) -> CheckResult:
    return CheckResult(name=name, passed=False, score=0.0, detail=detail)


@scenario("arithmetic")
class Arithmetic(Scenario):
    """Multi-step word problems; exact integer answers, steps checked by a calculator, the gold held out."""

    check_cost = "instant"  # regular expressions and integer arithmetic on the text

    def tasks(self, *, seed: int) -> Iterator[Task]:
        rng = random.Random(seed)
        for i in range(SIZE):
            prompt, answer = _problem(rng)
            yield Task(task_id=f"arithmetic-{i:04d}", scenario=self.name, prompt=prompt, gold={"answer": answer})

    def system_prompt(self) -> str:
        return (
            "Solve the word problem. Write each step as an equation with the problem's numbers, "
            "like '7 + 5 = 12', one per line, then end with a last line of the form 'Answer: <integer>'."
        )

    def answer(self, text: str) -> str | None:
        value = extract_answer(text)
        return None if value is None else str(value)

    def check(self, task: Task, text: str) -> list[CheckResult]:
        return check_steps(task.prompt, text)

    def grade(self, task: Task, text: str) -> CheckResult | None:
        if "answer" not in task.gold:
            return None
        gold = int(task.gold["answer"])
        value = extract_answer(text)
        if value == gold:
            return CheckResult(name="gold_answer", passed=True, score=1.0, detail=f"the answer {value} is right")
        return _fail("gold_answer", f"the answer {value} is wrong; the gold answer is {gold}")
