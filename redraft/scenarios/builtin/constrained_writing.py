"""Short texts written under rules that are checked exactly; the critic judges what rules cannot.

Each seeded task asks for a short text on a topic in a given format (a bulleted
list of N items, a numbered list of N items, or one paragraph), with a word
count range, words that must appear and words that must not. The check gives
one result per rule, so the score is the share of rules kept; whether the text
is any good (on topic, clear, not padded) is left to the critic.

Stages (for the ``stepwise`` strategy): an ``outline`` (one short line per
item or point), a ``draft`` judged on its format, its required words and its
forbidden ones, and a ``polish`` judged by every rule, the word count included.

Every rule is written in the task's prompt, so a user has the whole check at
inference time: this scenario's feedback is its grade (``feedback_is_grade``),
and nothing is held out.

Invariants: the task list depends only on the seed; checks never raise for bad
text; words are counted as runs of letters, digits, apostrophes and hyphens
outside list markers, and a word matches a required or forbidden one as a whole
word, ignoring case.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

from redraft.protocols.messages import CheckResult, Task
from redraft.protocols.stages import Stage
from redraft.scenarios import Scenario, scenario

SIZE = 120
OUTLINE_MAX_WORDS = 12
"""An outline line longer than this is prose, not an outline point."""

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*")
_BULLET = re.compile(r"^\s*[-*•]\s+\S")
_NUMBERED = re.compile(r"^\s*(\d+)[.)]\s+\S")
_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_TOPICS: dict[str, list[str]] = {
    "keeping houseplants alive": ["water", "light", "soil", "pot", "leaves", "roots"],
    "a first week learning to cycle": ["balance", "brakes", "helmet", "pedal", "road", "wobble"],
    "packing for a rainy weekend hike": ["jacket", "boots", "map", "snacks", "socks", "tarp"],
    "running a neighbourhood book swap": ["shelf", "sign", "donations", "genres", "volunteers", "books"],
    "making good coffee at home": ["grind", "beans", "kettle", "filter", "ratio", "scale"],
    "starting to learn a new language": ["vocabulary", "practice", "listening", "grammar", "mistakes", "habit"],
}
_FORBIDDEN = ["very", "really", "thing", "things", "just", "basically", "actually", "stuff", "nice", "great"]


def words(text: str) -> list[str]:
    """The text's words, list markers (``-``, ``*``, ``1.``) left out."""
    return _WORD.findall("\n".join(_MARKER.sub("", line) for line in text.splitlines()))


def _lines(text: str) -> list[str]:
    return [line for line in text.strip().splitlines() if line.strip()]


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w'’-]){re.escape(word)}(?![\w'’-])", text, re.IGNORECASE) is not None


def _result(name: str, ok: bool, detail: str) -> CheckResult:
    return CheckResult(name=name, passed=ok, score=1.0 if ok else 0.0, detail=detail)


def check_format(text: str, fmt: str, items: int) -> CheckResult:
    """Exactly ``items`` list items and nothing else, or one paragraph."""
    lines = _lines(text)
    if fmt == "paragraph":
        if len(lines) != 1:
            return _result("format", False, f"write one paragraph with no line breaks, not {len(lines)} lines")
        if _MARKER.match(lines[0]):
            return _result("format", False, "write one paragraph, not a list item")
        return _result("format", True, "one paragraph")
    pattern, kind = (_BULLET, "bulleted") if fmt == "bullets" else (_NUMBERED, "numbered")
    listed = [line for line in lines if pattern.match(line)]
    other = len(lines) - len(listed)
    if len(listed) == items and other == 0:
        if fmt == "numbered" and [int(m.group(1)) for line in listed if (m := _NUMBERED.match(line))] != list(
            range(1, items + 1)
        ):
            return _result("format", False, f"number the items 1 to {items} in order")
        return _result("format", True, f"a {kind} list of {items} items")
    marker = "'- '" if fmt == "bullets" else "'1. ', '2. ', ..."
    extra = f" and {other} other line(s)" if other else ""
    detail = f"found {len(listed)} {kind} item(s){extra}; write exactly {items} lines, each starting with {marker}"
    return _result("format", False, detail)


def check_word_count(text: str, low: int, high: int) -> CheckResult:
    count = len(words(text))
    if low <= count <= high:
        return _result("word_count", True, f"{count} words")
    direction = "cut" if count > high else "add"
    return _result("word_count", False, f"{count} words; the range is {low} to {high}: {direction} some")


def check_required(text: str, required: list[str]) -> CheckResult:
    missing = [w for w in required if not _has_word(text, w)]
    if not missing:
        return _result("required_words", True, "every required word is used")
    return _result("required_words", False, f"missing required word(s): {', '.join(missing)}")


def check_forbidden(text: str, forbidden: list[str]) -> CheckResult:
    used = [w for w in forbidden if _has_word(text, w)]
    if not used:
        return _result("forbidden_words", True, "no forbidden word is used")
    return _result("forbidden_words", False, f"forbidden word(s) used: {', '.join(used)}; rephrase without them")


def _rules(rng: random.Random) -> tuple[str, dict[str, Any]]:
    topic = rng.choice(sorted(_TOPICS))
    fmt = rng.choice(["bullets", "numbered", "paragraph"])
    items = rng.randint(3, 5)
    low = rng.choice([30, 40, 50, 60])
    high = low + rng.choice([15, 20, 30])
    required = sorted(rng.sample(_TOPICS[topic], 2))
    forbidden = sorted(rng.sample(_FORBIDDEN, 3))
    shape = {
        "bullets": f"a bulleted list of exactly {items} items (each line starting with '- ')",
        "numbered": f"a numbered list of exactly {items} items ('1. ', '2. ', ...)",
        "paragraph": "a single paragraph (no line breaks, no list)",
    }[fmt]
    prompt = (
        f"Write tips on {topic} as {shape}. Use between {low} and {high} words in all. "
        f"Use the words {' and '.join(repr(w) for w in required)}. "
        f"Do not use the words {', '.join(repr(w) for w in forbidden)}."
    )
    reference = {"format": fmt, "items": items, "min_words": low, "max_words": high}
    return prompt, reference | {"required": required, "forbidden": forbidden}


@scenario("constrained_writing")
class ConstrainedWriting(Scenario):
    """Short texts under exact rules: format, word count range, required and forbidden words."""

    feedback_is_grade = True  # every rule is written in the prompt: the feedback is the grade
    check_cost = "instant"  # word counts and lookups on the text
    draft_tokens = 256  # a paragraph

    def tasks(self, *, seed: int) -> Iterator[Task]:
        rng = random.Random(seed)
        for i in range(SIZE):
            prompt, reference = _rules(rng)
            yield Task(task_id=f"constrained_writing-{i:04d}", scenario=self.name, prompt=prompt, reference=reference)

    def system_prompt(self) -> str:
        return (
            "You are a careful writer. Follow every rule of the task exactly: the format, the number of items, "
            "the word count range, the words to use and the words to avoid. Answer with the text only."
        )

    def answer(self, text: str) -> str | None:
        normalised = " ".join(w.casefold() for w in words(text))
        return normalised or None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        ref = task.reference
        return [
            check_format(text, str(ref["format"]), int(ref["items"])),
            check_word_count(text, int(ref["min_words"]), int(ref["max_words"])),
            check_required(text, list(ref["required"])),
            check_forbidden(text, list(ref["forbidden"])),
        ]

    def stages(self) -> list[Stage]:
        return [
            Stage(
                "outline",
                "Write an outline: one short line per list item (or per sentence of the paragraph), "
                f"at most {OUTLINE_MAX_WORDS} words each, no full text yet. Avoid the forbidden words.",
            ),
            Stage("draft", "Write the text from the outline, in the required format, using the required words."),
            Stage("polish", "Fix the text so it keeps every rule, the word count range included; return it only."),
        ]

    def check_stage(self, task: Task, stage: str, text: str) -> list[CheckResult]:
        ref = task.reference
        if stage == "outline":
            return self._check_outline(text, ref)
        if stage == "draft":
            return [
                check_format(text, str(ref["format"]), int(ref["items"])),
                check_required(text, list(ref["required"])),
                check_forbidden(text, list(ref["forbidden"])),
            ]
        return self.check(task, text)  # the last stage (or an unknown name): every rule

    def _check_outline(self, text: str, ref: dict[str, Any]) -> list[CheckResult]:
        points = [_MARKER.sub("", line) for line in _lines(text)]
        wanted = int(ref["items"]) if ref["format"] != "paragraph" else None
        if not points or (wanted is not None and len(points) != wanted):
            expected = f"exactly {wanted}" if wanted is not None else "at least one"
            count = _result("outline_points", False, f"found {len(points)} point(s); write {expected}, one per line")
        else:
            count = _result("outline_points", True, f"{len(points)} point(s)")
        long = [i + 1 for i, point in enumerate(points) if len(_WORD.findall(point)) > OUTLINE_MAX_WORDS]
        brevity = _result(
            "outline_brevity",
            not long,
            f"point(s) {', '.join(map(str, long))} are longer than {OUTLINE_MAX_WORDS} words; keep each to a phrase"
            if long
            else "every point is short",
        )
        return [count, brevity, check_forbidden(text, list(ref["forbidden"]))]
