"""The written rules of an incident summary, read back from a reply and checked exactly.

A reply is read as sections: a line whose text starts with a label (``Summary:``, ``Impact:``,
``Timeline:``, ``Root cause:``, ``Actions:``) opens one, and the lines after it, up to the next
label, belong to it. Each rule has one check, which reads the reply and what a user has (the log,
the rules' limits), never the gold: it can say that a time is in no log line, never that it is the
wrong one.

The places a fact is read from (`Reply.impact`, `root_cause_names`) are the grade's too, so a
fact has one value in one place: the Impact line in its exact form, the one service and the one
error code named under ``Root cause:``.

Invariants: no check raises, whatever the text; a word is a whitespace-separated run holding a
letter or a digit; labels are matched exactly, at the start of a line's text; a section given
twice has no content (`Reply.section` is None).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import NamedTuple

from redraft.protocols.messages import CheckResult
from redraft.scenarios.builtin._incident_logs import CODE

LABELS = ("Summary:", "Impact:", "Timeline:", "Root cause:", "Actions:")
IMPACT_FORM = "Impact: from HH:MM to HH:MM, N failed requests"
_IMPACT = re.compile(r"^Impact: from (\d{2}):(\d{2}) to (\d{2}):(\d{2}), (\d{1,9}) failed requests\.?$")
_BULLET = re.compile(r"^- (\d{2}):(\d{2}) +\S")
_SHOWN = 80
"""How much of a faulty line a detail quotes."""


class Impact(NamedTuple):
    """The Impact line's values: when the impact started and ended (HH:MM), and the failed requests."""

    start: str
    end: str
    failed_requests: int


@dataclass
class Reply:
    """A reply read as sections: the labels in the order they open one, and each one's lines."""

    order: list[str] = field(default_factory=list)
    preamble: list[str] = field(default_factory=list)
    """Non-empty lines before the first label."""
    occurrences: dict[str, list[list[str]]] = field(default_factory=dict)
    """Label -> the lines of each section it opens (stripped; the label's own line first, without the label)."""

    def section(self, label: str) -> list[str] | None:
        """The lines of the one section ``label`` opens; None when it opens none or more than one."""
        found = self.occurrences.get(label, [])
        return found[0] if len(found) == 1 else None

    def text_of(self, label: str) -> str:
        """The section's text on one line ('' when `section` is None)."""
        return " ".join(line for line in self.section(label) or [] if line)

    def impact(self) -> Impact | None:
        """The Impact line's values when the section is that one line, in its exact form, with valid times."""
        lines = self.section("Impact:")
        if lines is None or any(lines[1:]):
            return None
        found = _IMPACT.match(f"Impact: {lines[0]}")
        if found is None:
            return None
        start, end = _clock(found.group(1), found.group(2)), _clock(found.group(3), found.group(4))
        if start is None or end is None or end < start:
            return None
        return Impact(start, end, int(found.group(5)))


def read_reply(text: str) -> Reply:
    """``text`` as sections (`Reply`)."""
    reply = Reply()
    current: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        label = next((label for label in LABELS if line.startswith(label)), None)
        if label is not None:
            reply.order.append(label)
            current = [line[len(label) :].strip()]
            reply.occurrences.setdefault(label, []).append(current)
        elif current is not None:
            current.append(line)
        elif line:
            reply.preamble.append(line)
    return reply


def _clock(hours: str, minutes: str) -> str | None:
    return f"{hours}:{minutes}" if int(hours) < 24 and int(minutes) < 60 else None


def words(text: str) -> list[str]:
    """The text's words: whitespace-separated runs that hold a letter or a digit."""
    return [token for token in text.split() if any(ch.isalnum() for ch in token)]


def root_cause_names(reply: Reply, services: Collection[str]) -> tuple[list[str], list[str]]:
    """The services (of ``services``, as whole words, ignoring case) and the error codes (`CODE`) named
    under ``Root cause:``, each once, in the order they first appear."""
    text = reply.text_of("Root cause:")
    named = []
    for service in services:
        found = re.search(rf"(?<![\w-]){re.escape(service)}(?![\w-])", text, re.IGNORECASE)
        if found is not None:
            named.append((found.start(), service))
    codes = list(dict.fromkeys(CODE.findall(text)))
    return [service for _, service in sorted(named)], codes


def rule_result(name: str, faults: list[str], fine: str) -> CheckResult:
    """A rule's check: failed with its faults (joined, cut at 500 characters), or passed saying ``fine``."""
    if faults:
        return CheckResult(name=name, passed=False, score=0.0, detail="; ".join(faults)[:500])
    return CheckResult(name=name, passed=True, score=1.0, detail=fine)


def check_sections(reply: Reply, text: str) -> CheckResult:
    """Rule 1: the five labels, once each, in order, each at the start of its line, nothing before the first."""
    faults = []
    missing = [label for label in LABELS if label not in reply.occurrences]
    folded = text.casefold()
    misplaced = [label for label in missing if label.casefold() in folded]
    if misplaced:
        faults.append(f"not at the start of a line, spelt so: {', '.join(misplaced)}")
    if len(misplaced) < len(missing):
        faults.append(f"missing: {', '.join(label for label in missing if label not in misplaced)}")
    faults += [f"{label!r} opens {len(found)} sections" for label, found in reply.occurrences.items() if len(found) > 1]
    if not faults and reply.order != list(LABELS):
        faults.append(f"the sections are in the order {', '.join(reply.order)}")
    if reply.preamble:
        faults.append(f"{len(reply.preamble)} line(s) before the first section; start the reply with 'Summary:'")
    if faults:
        faults.append(f"write each section's label at the start of its line, in plain text: {', '.join(LABELS)}")
    return rule_result("sections", faults, "the five sections, in order")


def check_summary(reply: Reply, max_words: int) -> CheckResult:
    """Rule 2: the summary has at most ``max_words`` words (and at least one)."""
    if reply.section("Summary:") is None:
        return rule_result("summary", ["no single 'Summary:' section to count"], "")
    count = len(words(reply.text_of("Summary:")))
    if count == 0:
        return rule_result("summary", ["the summary is empty"], "")
    if count > max_words:
        return rule_result("summary", [f"the summary has {count} words; the limit is {max_words}"], "")
    return rule_result("summary", [], f"{count} words")


def check_impact(reply: Reply) -> CheckResult:
    """Rule 3: the Impact section is one line in the exact form, with clock times, the start not after the end."""
    lines = reply.section("Impact:")
    if lines is None:
        return rule_result("impact", [f"no single 'Impact:' section; write one line: {IMPACT_FORM!r}"], "")
    if reply.impact() is not None:
        return rule_result("impact", [], "the Impact line has the required form")
    if any(lines[1:]):
        return rule_result("impact", [f"write the Impact section as one line, the label's own: {IMPACT_FORM!r}"], "")
    shown = f"Impact: {lines[0]}"[:_SHOWN]
    return rule_result("impact", [f"{shown!r} is not {IMPACT_FORM!r} (24-hour times, start not after end)"], "")


def timeline_times(reply: Reply) -> list[str]:
    """The HH:MM of each timeline line written ``- HH:MM event`` with a valid time, in order."""
    times = []
    for line in (reply.section("Timeline:") or [])[1:]:
        found = _BULLET.match(line)
        if found is not None and (at := _clock(found.group(1), found.group(2))) is not None:
            times.append(at)
    return times


def check_timeline(reply: Reply, low: int, high: int) -> CheckResult:
    """Rule 4: ``Timeline:`` alone on its line, then ``low`` to ``high`` lines ``- HH:MM event``, in time order."""
    lines = reply.section("Timeline:")
    if lines is None:
        return rule_result("timeline", ["no single 'Timeline:' section"], "")
    faults = []
    if lines[0]:
        faults.append("put nothing after 'Timeline:' on its line; each event goes on a line of its own")
    events = [line for line in lines[1:] if line]
    times = timeline_times(reply)
    other = [line for line in events if not _BULLET.match(line)]
    if other:
        faults.append(f"{len(other)} line(s) are not '- HH:MM event', e.g. {other[0][:_SHOWN]!r}")
    if len(times) < len(events) - len(other):
        faults.append("a time is not a 24-hour HH:MM")
    if not low <= len(events) <= high:
        faults.append(f"the timeline has {len(events)} event lines; write {low} to {high}")
    if times != sorted(times):
        faults.append("the events are not in time order")
    return rule_result("timeline", faults, f"{len(events)} events in time order")


def check_timeline_times(reply: Reply, minutes: Collection[str]) -> CheckResult:
    """Rule 5: every timeline time is a minute at which the log has a line."""
    times = timeline_times(reply)
    if not times:
        return rule_result("timeline_times", ["no '- HH:MM event' line to check against the log"], "")
    absent = list(dict.fromkeys(at for at in times if at not in minutes))
    if absent:
        return rule_result("timeline_times", [f"no log line is at {', '.join(absent)}; use the log's times"], "")
    return rule_result("timeline_times", [], "every time is in the log")


def check_root_cause(reply: Reply, services: Collection[str], codes: Collection[str]) -> CheckResult:
    """Rule 6: ``Root cause:`` names exactly one service of the log and exactly one error code, one of the log's."""
    if reply.section("Root cause:") is None:
        return rule_result("root_cause", ["no single 'Root cause:' section"], "")
    named, written = root_cause_names(reply, services)
    faults = []
    if len(named) != 1:
        listed = f" ({', '.join(named)})" if named else ""
        faults.append(f"it names {len(named)} services of the log{listed}; name exactly one")
    if len(written) != 1:
        listed = f" ({', '.join(written[:6])})" if written else ""
        faults.append(f"it names {len(written)} error codes{listed}; name exactly one, spelt as in the log")
    elif written[0] not in codes:
        faults.append(f"{written[0]} is no error code of the log")
    return rule_result("root_cause", faults, "one service and one error code")


def check_word_count(text: str, max_words: int) -> CheckResult:
    """Rule 7: at most ``max_words`` words in all."""
    count = len(words(text))
    if count > max_words:
        return rule_result("word_count", [f"{count} words in all; the limit is {max_words}: cut some"], "")
    return rule_result("word_count", [], f"{count} words")


def check_line_length(text: str, max_chars: int) -> CheckResult:
    """Rule 8: no line longer than ``max_chars`` characters."""
    long = [(n + 1, len(line)) for n, line in enumerate(text.splitlines()) if len(line) > max_chars]
    if long:
        shown = ", ".join(f"line {n} has {size}" for n, size in long[:5])
        return rule_result("line_length", [f"{shown} characters; the limit is {max_chars}"], "")
    return rule_result("line_length", [], f"no line over {max_chars} characters")
