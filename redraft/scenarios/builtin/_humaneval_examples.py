"""The examples a HumanEval prompt shows: calls of its function and the values they should return.

HumanEval's feedback runs these (what a user has at inference time: they are in the prompt),
while the data set's hidden ``check()`` tests stay the held-out grade. The prompts write examples
in many styles, all found here, in the docstrings of the prompt's function:

- doctest: ``>>> f(x)`` and the expected output on the lines after it (none: ``None``), or
  ``>>> f(x) == y`` on one line;
- inline: ``f(x) ==> y``, ``=> y``, ``➞ y``, ``-> y``, ``== y``, ``= y``, ``should return y``,
  ``returns y``, ``# returns y``, ``# => y`` (a call may span lines, as in ``get_row([...], 1)``);
- ``Input: x`` (or ``a = x, b = y``) then ``Output: y``;
- ``For a = x the output should be y`` (or ``the result should be``).

Invariant: nothing is guessed. Each call is parsed with `ast` and must call the entry point with
literal arguments (keyword arguments are placed by the function's own signature; ``round(f(x),
2)`` is the one wrapper a prompt uses); each expected value is parsed with `ast.literal_eval`
(a Python comment after it is allowed, a sentence's final period dropped). Anything else (``=>
true``, ``-> 19 - 5 - 6 = 8``, ``is_happy(a)``) is skipped.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

WRAPPERS = frozenset({"round"})
"""Functions an example may apply to the entry point's result (HumanEval/32: ``round(find_zero(xs), 2)``)."""

_LITERAL_NODES = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.UnaryOp, ast.USub, ast.UAdd, ast.Load)
_INLINE_SEPARATOR = re.compile(r"\s*(?:#\s*)?(?:==>|=>|➞|->|==|=|should return|returns)\s*")
_INPUT_OUTPUT = re.compile(r"Input:\s*(?P<args>.*?)\s*Output:[ \t]*(?P<out>[^\n]*)", re.DOTALL)
_FOR_SHOULD_BE = re.compile(r"For (?P<args>[^\n]*?),?\s+the (?:output|result) should be\s+(?P<out>[^\n]*)")


@dataclass(frozen=True)
class Example:
    """One example of a prompt: an expression calling the entry point, and the literal it should equal."""

    call: str
    """The call, normalised by `ast.unparse` (``add(2, 3)``; keyword arguments placed by position)."""
    expected: str
    """The expected value as a literal's source (``5``, ``'abc'``, ``[1, 2]``): its `repr`."""


@functools.cache
def extract_examples(prompt: str, entry_point: str) -> tuple[Example, ...]:
    """Every example in the docstrings of ``entry_point`` in ``prompt``, each once, in the order found."""
    function = _function(prompt, entry_point)
    if function is None:
        return ()
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    found: dict[Example, None] = {}
    for text in _docstrings(prompt, function):
        for call, expected in _candidates(text, entry_point):
            example = _example(call, expected, entry_point, params)
            if example is not None:
                found.setdefault(example)
    return tuple(found)


def _function(prompt: str, entry_point: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return None
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry_point), None)


def _docstrings(prompt: str, function: ast.FunctionDef) -> Iterator[str]:
    """The function's string statements as written in the prompt (escapes unprocessed, as a reader sees them)."""
    for statement in function.body:
        value = statement.value if isinstance(statement, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            yield ast.get_source_segment(prompt, value) or ""


def _candidates(text: str, entry_point: str) -> Iterator[tuple[str, str]]:
    """(call source, expected source) pairs in every style, not yet validated."""
    yield from _doctests(text)
    yield from _inline(text, entry_point)
    for pattern in (_INPUT_OUTPUT, _FOR_SHOULD_BE):
        for match in pattern.finditer(text):
            yield f"{entry_point}({match['args']})", match["out"]


def _doctests(text: str) -> Iterator[tuple[str, str]]:
    lines = [line.strip() for line in text.splitlines()]
    for i, line in enumerate(lines):
        if not line.startswith(">>>"):
            continue
        source = line[3:].strip()
        output = []
        for following in lines[i + 1 :]:
            if not following or following.startswith(">>>") or following.startswith(('"""', "'''")):
                break
            output.append(following)
        if output:
            yield source, "\n".join(output)
            continue
        try:
            node = ast.parse(source, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            yield ast.unparse(node.left), ast.unparse(node.comparators[0])
        else:
            yield source, "None"  # doctest: a call that prints nothing returned None


def _inline(text: str, entry_point: str) -> Iterator[tuple[str, str]]:
    """``f(x) <separator> y``: the shortest text from ``f(`` that parses as a call, then the rest of its line."""
    for start in (m.start() for m in re.finditer(rf"(?<![\w.]){re.escape(entry_point)}\(", text)):
        if text[:start].rstrip().endswith("def"):
            continue
        for end in (i + 1 for i, char in enumerate(text) if char == ")" and i > start):
            try:
                ast.parse(text[start:end], mode="eval")
            except SyntaxError:
                continue
            rest = text[end:].split("\n", 1)[0]
            separator = _INLINE_SEPARATOR.match(rest)
            if separator and separator.end() < len(rest):
                yield text[start:end], rest[separator.end() :]
            break


def _example(call: str, expected: str, entry_point: str, params: list[str]) -> Example | None:
    """The validated example, or None when the call or the value is not what the rules accept."""
    value = _literal(expected.strip())
    if value is _NOT_A_LITERAL:
        return None
    try:
        parsed = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return None
    node = _positional(parsed, entry_point, params)
    return None if node is None else Example(call=ast.unparse(node), expected=repr(value))


_NOT_A_LITERAL = object()


def _literal(text: str) -> object:
    """``text`` as a literal (a sentence's final period dropped first), else `_NOT_A_LITERAL`."""
    for attempt in [text[:-1], text] if text.endswith(".") else [text]:
        try:
            return ast.literal_eval(attempt)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return _NOT_A_LITERAL


def _positional(node: ast.expr, entry_point: str, params: list[str]) -> ast.expr | None:
    """The expression with the entry point's keyword arguments placed by position, or None if it is not
    a call of the entry point (possibly inside a wrapper) on literal arguments."""
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
    ours = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == entry_point]
    if not ours or any(not isinstance(c.func, ast.Name) or c.func.id not in {entry_point, *WRAPPERS} for c in calls):
        return None
    callees = {id(c.func) for c in calls}
    for n in ast.walk(node):
        if not isinstance(n, (*_LITERAL_NODES, ast.Call, ast.keyword, ast.Name)) or (
            isinstance(n, ast.Name) and id(n) not in callees
        ):
            return None
    for call in ours:
        if call.keywords and not _place_keywords(call, params):
            return None
    return node


def _place_keywords(call: ast.Call, params: list[str]) -> bool:
    """Move keyword arguments into position by ``params``; False if they do not fit the signature."""
    by_name = {k.arg: k.value for k in call.keywords}
    if None in by_name or not set(by_name) <= set(params[len(call.args) :]):
        return False
    wanted = params[len(call.args) : len(call.args) + len(by_name)]
    if set(wanted) != set(by_name):
        return False  # a gap: a parameter before a named one is missing
    call.args = [*call.args, *(by_name[name] for name in wanted)]
    call.keywords = []
    return True
