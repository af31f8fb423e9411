"""Tune's search and verdict, in this process: an evaluator that scores a prompts file by a known rule (or by
noise), a proposer that reads the examples it is given. The same search runs on Ray in
tests/integration/test_tune_on_ray.py."""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from redraft.config import Budgets
from redraft.engine.prompt_files import about, load_prompts
from redraft.protocols.messages import Task, Usage
from redraft.protocols.tuning import Example, Failure, Proposal, ProposeRequest
from redraft.tuning._budget import Costs, TuneBudget
from redraft.tuning._edits import prompts_file
from redraft.tuning._journal import JOURNAL, Evaluation, PromptCandidate, TuneJournal
from redraft.tuning._search import START, Search, SearchSettings, choose_parent, front, lineage, winner
from redraft.tuning._splits import split_tasks
from redraft.tuning._verdict import TUNED, adopt, decide, unread
from tests.support.tune_world import RULE

TASKS = {f"t{i:03d}": Task(task_id=f"t{i:03d}", scenario="arithmetic", prompt=f"Add {i} and 1.") for i in range(60)}


class Evaluator:
    """Scores a prompts file: each task 1 when the drafter's system prompt holds `RULE` (``rule``), or by a coin
    seeded by the prompt's text and the task (``noise``); counts its calls; sleeps a random while (``jitter``)."""

    def __init__(self, world: str, jitter: float = 0.0) -> None:
        self.world, self.jitter, self.calls = world, jitter, 0
        self._lock = threading.Lock()

    def __call__(self, candidate: str, on: str, prompts: Path, tasks: Path, out: Path) -> Evaluation:
        with self._lock:
            self.calls += 1
        if self.jitter:
            time.sleep(random.random() * self.jitter)
        text = load_prompts(str(prompts)).templates["draft_system"].text.template
        ids = [line.split('"')[3] for line in tasks.read_text().splitlines()]
        figures = {i: self._figure(text, i) for i in ids}
        usage = Usage(calls=len(ids), input_tokens=10 * len(ids), output_tokens=5 * len(ids))
        return Evaluation(
            candidate=candidate,
            on=on,
            figures=figures,
            feedback=dict(figures),
            graded=True,
            usage=usage,
            run=f"evaluations/{candidate}/{on}",
        )

    def close(self) -> None:
        pass  # nothing shared between evaluations

    def _figure(self, text: str, task: str) -> float:
        if self.world == "rule":
            return float(RULE in text)
        return float(hashlib.sha256((text + task).encode()).digest()[0] % 2)


class Proposer:
    """Adds `RULE` when an example's failed check states it, else a sentence numbered by the request's seed."""

    def __init__(self) -> None:
        self.requests: list[ProposeRequest] = []

    def __call__(self, request: ProposeRequest) -> Proposal:
        self.requests.append(request)
        said = [f.detail for e in request.examples for f in e.failures]
        if any(RULE in d for d in said) and RULE not in request.text:
            return Proposal(section=request.section, text=f"{request.text}\n{RULE}", reason="the checks ask for it")
        return Proposal(section=request.section, text=f"{request.text}\nBe exact ({request.seed}).", reason="clarify")


def examples(run_dir: Path, prompts: Mapping[str, str], limit: int) -> list[Example]:
    """What the loop's checks would say of a reply without the rule, for each task the search hands over."""
    failure = Failure(check="form", detail=f"not of the form; {RULE}")
    return [Example(task_id=i, prompt=p, answer="x", feedback=0.0, failures=[failure]) for i, p in prompts.items()][
        :limit
    ]


def search(
    tmp_path: Path,
    evaluator: Evaluator,
    proposer: Proposer,
    *,
    budget: Budgets | None = None,
    proposals: int = 4,
    parallel: int = 2,
) -> Search:
    splits = split_tasks(TASKS.values(), seed=0)
    journal = TuneJournal(tmp_path)
    if START not in journal.candidates:
        path = prompts_file({}, {}, tmp_path / "prompts" / "c0.toml")
        journal.add(
            PromptCandidate(
                id=START,
                parent=None,
                iteration=None,
                section=None,
                reason="",
                entries={},
                file=str(path.relative_to(tmp_path)),
            )
        )
    costs = Costs(task=Usage(calls=1, input_tokens=10, output_tokens=5), proposal=Usage(calls=1))
    return Search(
        root=tmp_path,
        splits=splits,
        tasks=TASKS,
        journal=journal,
        evaluate=evaluator,
        propose=proposer,
        settings=SearchSettings(sections=["draft_system"], minibatch=6, max_proposals=proposals, parallel=parallel),
        budget=TuneBudget(limits=budget or Budgets(), paid=journal.spent),
        costs=costs,
        read_examples=examples,
    )


def test_the_search_finds_the_rule_the_feedback_states_and_validation_prefers_it(tmp_path: Path) -> None:
    found = search(tmp_path, Evaluator("rule"), Proposer()).run()
    assert RULE in found.entries["draft_system"][1] and found.entries["draft_system"][0] == 2
    kept = [i for i in found.entries]
    assert kept == ["draft_system"]
    assert load_prompts(str(tmp_path / found.file)).templates["draft_system"].text.template.endswith(RULE)


def test_the_proposer_is_shown_train_tasks_only_never_validation_or_test(tmp_path: Path) -> None:
    proposer = Proposer()
    made = search(tmp_path, Evaluator("noise"), proposer, proposals=6)
    made.run()
    train = set(made.splits.train)
    shown = {e.task_id for r in proposer.requests for e in r.examples}
    assert proposer.requests and shown and shown <= train
    held = {TASKS[i].prompt for i in made.splits.validation + made.splits.test}
    assert not any(e.prompt in held for r in proposer.requests for e in r.examples)


def test_parallel_iterations_give_the_same_search_whatever_finishes_first(tmp_path: Path) -> None:
    runs = []
    for n in range(2):
        made = search(tmp_path / str(n), Evaluator("noise", jitter=0.02 * n), Proposer(), proposals=6, parallel=3)
        made.run()
        runs.append([(i.parent, i.minibatch, i.child, i.kept) for _, i in sorted(made.journal.iterations.items())])
    assert runs[0] == runs[1] and len(runs[0]) == 6


def test_a_resumed_search_scores_nothing_again_and_asks_nothing_again(tmp_path: Path) -> None:
    first = search(tmp_path, Evaluator("noise"), Proposer(), proposals=4)
    best = first.run()
    again_evaluator, again_proposer = Evaluator("noise"), Proposer()
    again = search(tmp_path, again_evaluator, again_proposer, proposals=4)
    assert again.run() == best
    assert again_evaluator.calls == 0 and again_proposer.requests == []
    more = search(tmp_path, Evaluator("noise"), Proposer(), proposals=6)
    more.run()
    assert len(more.journal.iterations) == 6  # the two new iterations ran, the four old were read


def test_a_torn_last_line_of_the_journal_is_set_aside_and_the_rest_resumes(tmp_path: Path) -> None:
    search(tmp_path, Evaluator("noise"), Proposer(), proposals=2).run()
    journal = tmp_path / JOURNAL
    whole = journal.read_bytes()
    torn = b'{"type":"evaluation","candidate":"c9","on":"valid'
    journal.write_bytes(whole + torn)
    evaluator = Evaluator("noise")
    search(tmp_path, evaluator, Proposer(), proposals=2).run()
    assert evaluator.calls == 0 and journal.read_bytes() == whole
    assert (tmp_path / f"{JOURNAL}.damaged").read_bytes() == torn


def test_a_line_that_is_no_record_in_the_middle_of_the_journal_costs_that_record_only(tmp_path: Path) -> None:
    search(tmp_path, Evaluator("noise"), Proposer(), proposals=1).run()
    journal = tmp_path / JOURNAL
    lines = journal.read_bytes().splitlines(keepends=True)
    # The start's score on validation: what that line recorded is done again, nothing else.
    [spoilt] = [i for i, line in enumerate(lines) if b'"candidate":"c0","on":"validation"' in line]
    journal.write_bytes(b"".join([*lines[:spoilt], b"not json\n", *lines[spoilt + 1 :]]))
    evaluator = Evaluator("noise")
    search(tmp_path, evaluator, Proposer(), proposals=1).run()
    assert evaluator.calls == 1
    assert (tmp_path / f"{JOURNAL}.damaged").read_bytes() == b"not json\n"
    assert journal.read_bytes().splitlines(keepends=True)[:spoilt] == lines[:spoilt]


def test_a_refused_edit_costs_no_evaluation(tmp_path: Path) -> None:
    evaluator = Evaluator("rule")

    def refusing(request: ProposeRequest) -> Proposal:
        return Proposal(section=request.section, text=None, reason="", refused="placeholders", detail="drops $x")

    best = search(tmp_path, evaluator, refusing, proposals=3, parallel=1).run()  # type: ignore[arg-type]
    assert best.id == START
    assert evaluator.calls == 1 + 3  # the start on validation, and each iteration's parent on its minibatch


def test_the_budget_ends_the_search_before_an_iteration_it_cannot_afford(tmp_path: Path) -> None:
    # An iteration's worst case is 2 x 6 + 18 tasks (a call each) and a proposal: 31 calls.
    made = search(tmp_path, Evaluator("noise"), Proposer(), budget=Budgets(budget_calls=80), proposals=6, parallel=1)
    made.run()
    spent = made.journal.spent().calls
    assert 1 <= len(made.journal.iterations) < 6
    assert spent <= 80 < spent + 31  # it stopped only when the next worst case no longer fit


def test_front_counts_the_tasks_each_candidate_is_best_on_and_drops_the_dominated(tmp_path: Path) -> None:
    journal = TuneJournal(tmp_path)
    for name, figures in {"a": [1, 0, 0], "b": [0, 1, 1], "c": [0, 1, 0]}.items():
        scores = {f"v{i}": float(v) for i, v in enumerate(figures)}
        journal.add(
            Evaluation(
                candidate=name, on="validation", figures=scores, feedback=scores, graded=True, usage=Usage(), run="x"
            )
        )
    assert front(journal, ["a", "b", "c"]) == {"a": 1, "b": 2, "c": 1}
    assert winner(journal, ["a", "b", "c"]) == "b"
    assert winner(journal, ["a", "c"]) == "a"  # equal means: the earlier
    draws = [choose_parent(journal, ["a", "b", "c"], random.Random(s)) for s in range(400)]
    assert 0.4 < draws.count("b") / 400 < 0.6  # weight 2 of 4


def test_the_lineage_shows_each_version_of_the_section_with_its_feedback(tmp_path: Path) -> None:
    made = search(tmp_path, Evaluator("rule"), Proposer(), proposals=4, parallel=1)
    made.run()
    deepest = max(made.journal.candidates.values(), key=lambda c: len(lineage(made.journal, c.id, "draft_system")))
    edits = lineage(made.journal, deepest.id, "draft_system")
    assert edits[0].version == 1 and edits[0].text == "$instructions" and edits[0].feedback is None
    assert [e.version for e in edits] == list(range(1, len(edits) + 1))
    assert all(e.feedback is not None for e in edits[1:])


def _evaluation(name: str, figures: list[float]) -> Evaluation:
    scores = {f"x{i:02d}": v for i, v in enumerate(figures)}
    return Evaluation(candidate=name, on="test", figures=scores, feedback=scores, graded=True, usage=Usage(), run="r")


def test_the_verdict_adopts_only_a_significant_gain() -> None:
    gain = decide(_evaluation("c0", [0.0] * 12), _evaluation("c3", [1.0] * 12))
    assert gain.adopted and gain.significant and gain.test == "exact_mcnemar" and gain.low > 0
    assert gain.says.startswith("significant improvement")
    small = decide(_evaluation("c0", [0.0] * 12), _evaluation("c3", [1.0] * 3 + [0.0] * 9))
    assert not small.adopted and small.says.startswith("no significant improvement") and small.p == 0.25
    worse = decide(_evaluation("c0", [1.0] * 12), _evaluation("c3", [0.0] * 12))
    assert not worse.adopted and "significantly worse" in worse.says
    means = decide(_evaluation("c0", [0.5, 0.4] * 6), _evaluation("c3", [0.6, 0.5] * 6))
    assert means.test == "paired_t"


def test_no_winner_but_the_start_leaves_the_test_split_unread() -> None:
    said = unread(START, 18)
    assert not said.test_read and not said.adopted and "the test split was not read" in said.says


def test_an_adopted_winner_is_written_as_a_new_prompts_file_naming_its_parent(tmp_path: Path) -> None:
    verdict = decide(_evaluation("c0", [0.0] * 12), _evaluation("c3", [1.0] * 12))
    entries = {"draft_system": (2, f"$instructions\n{RULE}")}
    best = PromptCandidate(
        id="c3", parent="c1", iteration=2, section="draft_system", reason="r", entries=entries, file="f"
    )
    start = prompts_file({"draft_task": (4, "Do it: $task")}, {"version": 3}, tmp_path / "mine.toml")
    written = adopt(verdict, best, {"parent": str(start), "version": about(str(start))["version"]}, tmp_path)
    assert written.prompts == TUNED
    said = about(str(tmp_path / TUNED))
    assert said["version"] == 4 and said["parent"] == str(start) and "c3" in said["made"] and "p = " in said["made"]
    assert load_prompts(str(tmp_path / TUNED)).templates["draft_system"].text.template.endswith(RULE)
