"""``labels.jsonl`` as a state machine: reviewers append labels and preferences, writers are killed mid-line (a torn
tail, sometimes torn again before anyone appends), another program writes a line that is not a judgement, and the
file is read again and again.

The invariants, at every step:

- every whole record appended is read back, once, in the order appended (history kept);
- exactly the damaged lines are set aside: a torn tail counts as one line until an append seals it, and stays one;
- per task, the latest label appended wins; per task and pair of arms, the latest preference;
- no other file appears beside ``labels.jsonl``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import msgspec
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from redraft.rundir import LABELS, Label, Preference, answer_digest, append_label, append_preference, read_judgements
from tests.support.machines import MACHINE

TASKS = st.sampled_from(["t1", "t2", "HumanEval/3"])
DIGESTS = st.sampled_from([answer_digest(text) for text in ("a", "b", "c")])
ARMS = st.sampled_from(["greedy", "refine", "debate"])
REVIEWERS = st.sampled_from(["ana", "bo", "\ud800x"])


class LabelsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="redraft-labels-machine-"))
        self.labels: list[Label] = []
        self.preferences: list[Preference] = []
        self.set_aside = 0
        self.torn = False
        """The file ends in a torn line (no newline yet)."""
        self.clock = 1.0

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def tick(self) -> float:
        self.clock += 1.0
        return self.clock

    def appended(self) -> None:
        self.torn = False  # the append sealed the torn line: it stays one line set aside

    @rule(task=TASKS, reviewer=REVIEWERS, verdict=st.sampled_from(["pass", "fail"]), digest=DIGESTS)
    def label(self, task: str, reviewer: str, verdict: str, digest: str) -> None:
        made = Label(task, reviewer, verdict, digest, comment='because\n{"kind"')  # type: ignore[arg-type]
        self.labels.append(append_label(self.root, made, clock=self.tick))
        self.appended()

    @rule(
        task=TASKS,
        arms=st.lists(ARMS, min_size=2, max_size=2, unique=True),
        digests=st.tuples(DIGESTS, DIGESTS),
        choice=st.sampled_from(["A", "B", "tie"]),
    )
    def prefer(self, task: str, arms: list[str], digests: tuple[str, str], choice: str) -> None:
        made = Preference(task, "bo", (arms[0], arms[1]), digests, choice)  # type: ignore[arg-type]
        self.preferences.append(append_preference(self.root, made, clock=self.tick))
        self.appended()

    @rule(task=TASKS, digest=DIGESTS, data=st.data())
    def killed_mid_line(self, task: str, digest: str, data: st.DataObject) -> None:
        """A writer wrote part of a line (never its closing brace) and died."""
        line = msgspec.json.encode({"kind": "label", "v": 1, "task_id": task, "reviewer": "x", "verdict": "pass"})
        whole = line[:-1] + b',"answer_digest":"' + digest.encode() + b'","at":1}'
        cut = data.draw(st.integers(1, len(whole) - 1))
        with open(self.root / LABELS, "ab") as out:
            out.write(whole[:cut])
        if not self.torn:
            self.set_aside += 1  # a second tear before any append lengthens the same line
        self.torn = True

    @rule(garbage=st.sampled_from([b"not json", b"[1, 2]", b'{"kind":"label"}', b"\xff\xfe"]))
    def another_program_writes_a_line(self, garbage: bytes) -> None:
        with open(self.root / LABELS, "ab") as out:
            out.write(garbage + b"\n")
        if not self.torn:
            self.set_aside += 1
        self.torn = False

    @precondition(lambda self: self.labels or self.preferences)
    @rule()
    def read_again(self) -> None:
        assert read_judgements(self.root) == read_judgements(self.root)

    @invariant()
    def every_whole_record_is_read_once_and_the_latest_wins(self) -> None:
        found = read_judgements(self.root)
        assert found.labels == self.labels
        assert found.preferences == self.preferences
        assert found.set_aside == self.set_aside
        latest = {made.task_id: made for made in self.labels}
        assert found.latest_labels() == latest
        assert {key[0] for key in found.latest_preferences()} == {p.task_id for p in self.preferences}
        for (task, first, second), kept in found.latest_preferences().items():
            same = [p for p in self.preferences if p.task_id == task and sorted(p.shown) == [first, second]]
            assert kept == same[-1]  # each record's own time tells it from an equal earlier one

    @invariant()
    def no_other_file_appears(self) -> None:
        assert {path.name for path in self.root.iterdir()} <= {LABELS}


TestLabelsMachine = LabelsMachine.TestCase
TestLabelsMachine.settings = MACHINE
