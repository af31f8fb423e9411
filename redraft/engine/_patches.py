"""Patch revisions (delta-based correction): minimal search/replace edits applied to a candidate.

A model asked for a patch answers with blocks of this form::

    <<<<<<< SEARCH
    exact text copied from the answer
    =======
    the replacement text
    >>>>>>> REPLACE

Invariant: an edit applies only when its SEARCH text occurs exactly once in the
text as it stands after the edits before it; every edit that does not apply is
reported with its reason (never silently dropped), and the text is left as the
edits that did apply made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BLOCK = re.compile(
    r"<{5,9}\s*SEARCH[ \t]*\n(?P<search>.*?)\n?={5,9}[ \t]*\n(?P<replace>.*?)\n?>{5,9}\s*REPLACE",
    re.DOTALL,
)
_QUOTE_CHARS = 60


@dataclass(frozen=True)
class Edit:
    search: str
    replace: str


@dataclass
class Patched:
    """The text after the edits that applied, and why the others did not."""

    text: str
    applied: int = 0
    errors: list[str] = field(default_factory=list)


def parse_edits(reply: str) -> list[Edit]:
    """The search/replace blocks of a reply, in order."""
    return [Edit(m["search"], m["replace"]) for m in _BLOCK.finditer(reply)]


def apply_edits(text: str, reply: str) -> Patched:
    """Apply the reply's edits to ``text`` one after another; see the module docstring."""
    edits = parse_edits(reply)
    patched = Patched(text=text)
    if not edits:
        patched.errors.append("the reply had no SEARCH/REPLACE edit block; the answer was left unchanged")
        return patched
    for number, edit in enumerate(edits, 1):
        found = patched.text.count(edit.search) if edit.search.strip() else 0
        if found == 1:
            patched.text = patched.text.replace(edit.search, edit.replace, 1)
            patched.applied += 1
            continue
        quoted = _quote(edit.search)
        if not edit.search.strip():
            reason = "its SEARCH text is empty"
        elif found == 0:
            reason = f"its SEARCH text {quoted} is not in the answer; copy the exact text"
        else:
            reason = f"its SEARCH text {quoted} occurs {found} times; quote more of the line to make it unique"
        patched.errors.append(f"edit {number} did not apply: {reason}")
    return patched


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _QUOTE_CHARS else flat[: _QUOTE_CHARS - 3] + "...")
