"""The search: propose an edit of one section, keep it if it beats its parent on the same train minibatch,
score the kept ones on validation, and choose parents from the front of what validation has seen.

Iteration k:

1. picks a parent from the front (`front`): every candidate that is best, ties included, on at least one
   validation task, weighted by how many (GEPA's selection), with a generator seeded by (seed, k);
2. picks the section ``sections[k mod len(sections)]`` and a train minibatch seeded by (seed, k);
3. evaluates the parent on the minibatch and builds the proposer's request from that run's train tasks
   (`redraft.tuning._examples`) and the section's lineage, then asks the proposer;
4. evaluates the child (an edit the proposer's checks refused costs no evaluation) on the same minibatch,
   keeps it if its mean figure is strictly higher, and then evaluates it on validation.

``parallel`` iterations run at once (each evaluation a run on the cluster), and iteration k sees the front
as iterations 0..k-parallel left it: it waits for those, and only for those, so the results do not depend
on which evaluation finished first, and the proposer never waits for an evaluation it does not need.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from msgspec.structs import replace

from redraft.engine.proposer import limit_of, placeholders_of
from redraft.errors import RedraftError
from redraft.protocols.messages import Task
from redraft.protocols.tuning import Edit, Example, Judged, Proposal, ProposeRequest
from redraft.tuning._budget import Costs, TuneBudget
from redraft.tuning._edits import prompts_file, text_of
from redraft.tuning._evaluate import Evaluator
from redraft.tuning._examples import examples_of
from redraft.tuning._journal import Evaluation, Iteration, PromptCandidate, Proposed, TuneJournal
from redraft.tuning._splits import Split, Splits, write_tasks

Propose = Callable[[ProposeRequest], Proposal]
START = "c0"


@dataclass(frozen=True)
class SearchSettings:
    sections: list[str]
    minibatch: int = 8
    max_proposals: int = 8
    parallel: int = 2
    examples: int = 4
    seed: int = 0


@dataclass
class Search:
    """One tune's search over its journal (`run` resumes whatever the journal already holds)."""

    root: Path
    splits: Splits
    tasks: dict[str, Task]
    journal: TuneJournal
    evaluate: Evaluator
    propose: Propose
    settings: SearchSettings
    budget: TuneBudget
    costs: Costs
    say: Callable[[str], None] = lambda line: None
    read_examples: Callable[[Path, Mapping[str, str], int], list[Example]] = examples_of
    """The proposer's examples from a train evaluation's run directory (`redraft.tuning._examples`)."""
    judged: Mapping[str, Judged] = field(default_factory=dict)
    """What people said of earlier answers to train tasks (``--train-labels``), told the proposer with each example."""
    _ended: dict[int, threading.Event] = field(default_factory=dict)
    _halted: threading.Event = field(default_factory=threading.Event)

    def run(self) -> PromptCandidate:
        """Every iteration the budget affords, up to ``max_proposals``; the validation winner."""
        self.scored(START, "validation")
        self.budget.release("start")  # paid: the journal holds it now
        count, parallel = self.settings.max_proposals, max(1, self.settings.parallel)
        self._ended = {k: threading.Event() for k in range(count)}
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="redraft-tune") as pool:
            futures = [pool.submit(self._worker, w, count, parallel) for w in range(min(parallel, count))]
        for future in futures:
            future.result()  # an error in a worker is raised here, once all have ended
        return self.journal.candidates[winner(self.journal, self.kept_until(count))]

    def _worker(self, first: int, count: int, parallel: int) -> None:
        try:
            for k in range(first, count, parallel):
                for j in range(k - parallel + 1):
                    self._ended[j].wait()
                if self._halted.is_set() or not self._iterate(k):
                    self._halt()
                    return
                self._ended[k].set()
        except BaseException:
            self._halt()
            raise

    def _halt(self) -> None:
        """End the search (the budget, an error): no iteration starts after this, none waits on another."""
        self._halted.set()
        for event in self._ended.values():
            event.set()

    def _iterate(self, k: int) -> bool:
        """Iteration k (from the journal where recorded); False when the budget cannot afford it."""
        if k in self.journal.iterations:
            return True
        worst = self.costs.iteration(self.settings.minibatch, len(self.splits.validation))
        if not self.budget.reserve(f"iteration {k}", worst):
            self.say(f"iteration {k + 1}: the budget cannot afford its worst case; the search ends here")
            return False
        try:
            self.journal.add(self._iteration(k))
        finally:
            self.budget.release(f"iteration {k}")
        return True

    def _iteration(self, k: int) -> Iteration:
        rng = random.Random(f"{self.settings.seed}:{k}")
        visible = self.kept_until(k - self.settings.parallel + 1)  # what iterations 0..k-parallel left
        parent = self.journal.candidates[choose_parent(self.journal, visible, rng)]
        section = self.settings.sections[k % len(self.settings.sections)]
        batch = minibatch(self.splits.train, self.settings.minibatch, rng)
        on = f"minibatch-{k}"
        before = self.scored(parent.id, on, batch)
        proposal = self._proposal(k, parent, section, before)
        head = f"iteration {k + 1} of {self.settings.max_proposals}: {parent.id}, {section}"
        if proposal.text is None:
            self.say(f"{head}: edit refused ({proposal.refused}: {proposal.detail})")
            note = f"refused: {proposal.refused}"
            return Iteration(
                number=k,
                parent=parent.id,
                section=section,
                minibatch=batch,
                child=None,
                parent_score=before.mean,
                child_score=None,
                kept=False,
                note=note,
            )
        child = self._child(k, parent, section, proposal)
        after = self.scored(child.id, on, batch)
        kept = after.mean > before.mean
        validation = self.scored(child.id, "validation").mean if kept else None
        verdict = f"kept, validation {validation:.3f}" if validation is not None else "not kept"
        self.say(f"{head} -> {child.id}: minibatch {before.mean:.3f} -> {after.mean:.3f}, {verdict}")
        return Iteration(
            number=k,
            parent=parent.id,
            section=section,
            minibatch=batch,
            child=child.id,
            parent_score=before.mean,
            child_score=after.mean,
            kept=kept,
            validation=validation,
        )

    def kept_until(self, end: int) -> list[str]:
        """The start and every child kept by iterations before ``end``, in iteration order."""
        kept = [self.journal.iterations[j] for j in range(max(0, end)) if j in self.journal.iterations]
        return [START, *(i.child for i in kept if i.kept and i.child is not None)]

    def scored(self, candidate: str, on: str, ids: list[str] | None = None) -> Evaluation:
        """The candidate's evaluation on ``on`` (a split, or a minibatch of ``ids``): the journal's, or run."""
        found = self.journal.evaluations.get((candidate, on))
        if found is not None:
            return found
        ids = ids if ids is not None else self.splits.of(cast(Split, on))
        tasks = write_tasks([self.tasks[i] for i in ids], self.root / "tasks" / f"{on}.jsonl")
        prompts = self.root / self.journal.candidates[candidate].file
        made = self.evaluate(candidate, on, prompts, tasks, self.root / "evaluations" / candidate / on)
        if set(made.figures) != set(ids):
            missing = sorted(set(ids) - set(made.figures))[:3]
            raise RedraftError(f"evaluation of {candidate} on {on} is missing tasks {missing}; rerun to resume it")
        self.journal.add(made)
        return made

    def _proposal(self, k: int, parent: PromptCandidate, section: str, before: Evaluation) -> Proposal:
        recorded = self.journal.proposals.get(k)
        if recorded is not None:
            return recorded.proposal
        train = set(self.splits.train)
        prompts = {i: self.tasks[i].prompt for i in before.figures if i in train}
        _, text = text_of(parent.entries, section)
        request = ProposeRequest(
            section=section,
            text=text,
            placeholders=placeholders_of(text),
            limit=limit_of(text),
            history=lineage(self.journal, parent.id, section),
            examples=self._examples(before, prompts),
            feedback=before.feedback_mean,
            seed=self.settings.seed * 1_000_003 + k,
        )
        proposal = self.propose(request)
        self.journal.add(Proposed(iteration=k, parent=parent.id, proposal=proposal))
        return proposal

    def _examples(self, before: Evaluation, prompts: Mapping[str, str]) -> list[Example]:
        """The parent's train tasks as the proposer sees them, each with what a person said of it, if anyone did."""
        found = self.read_examples(self.root / before.run, prompts, self.settings.examples)
        return [replace(e, judged=self.judged.get(e.task_id)) for e in found] if self.judged else found

    def _child(self, k: int, parent: PromptCandidate, section: str, proposal: Proposal) -> PromptCandidate:
        identity = f"c{k + 1}"
        if identity in self.journal.candidates:
            return self.journal.candidates[identity]
        assert proposal.text is not None
        version, _ = text_of(parent.entries, section)
        entries = {**parent.entries, section: (version + 1, proposal.text)}
        about = {"version": k + 1, "parent": parent.id, "made": f"redraft tune, iteration {k + 1}: {proposal.reason}"}
        path = prompts_file(entries, about, self.root / "prompts" / f"{identity}.toml")
        child = PromptCandidate(
            id=identity,
            parent=parent.id,
            iteration=k,
            section=section,
            reason=proposal.reason,
            entries=entries,
            file=str(path.relative_to(self.root)),
        )
        self.journal.add(child)
        return child


def minibatch(train: list[str], size: int, rng: random.Random) -> list[str]:
    """``size`` train tasks drawn by ``rng``, in the train split's order."""
    chosen = set(rng.sample(train, min(size, len(train))))
    return [task_id for task_id in train if task_id in chosen]


def front(journal: TuneJournal, candidates: list[str]) -> dict[str, int]:
    """Each candidate best (ties included) on at least one validation task, with how many such tasks."""
    scores = {c: journal.evaluations[(c, "validation")].figures for c in candidates}
    counts = dict.fromkeys(candidates, 0)
    for task in scores[candidates[0]]:
        best = max(scores[c].get(task, 0.0) for c in candidates)
        for c in candidates:
            counts[c] += scores[c].get(task, 0.0) == best
    return {c: n for c, n in counts.items() if n}


def choose_parent(journal: TuneJournal, candidates: list[str], rng: random.Random) -> str:
    """A candidate of the front, drawn with weight its count of validation tasks."""
    weights = front(journal, candidates)
    names = sorted(weights, key=candidates.index)
    return rng.choices(names, weights=[weights[n] for n in names])[0]


def winner(journal: TuneJournal, candidates: list[str]) -> str:
    """The candidate with the highest mean validation figure (the earliest of equals: the start first)."""
    return max(candidates, key=lambda c: (journal.evaluations[(c, "validation")].mean, -candidates.index(c)))


def lineage(journal: TuneJournal, candidate: str, section: str) -> list[Edit]:
    """The versions of ``section`` along ``candidate``'s ancestry, oldest first, with their minibatch feedback."""
    chain: list[PromptCandidate] = []
    at: str | None = candidate
    while at is not None:
        chain.append(journal.candidates[at])
        at = journal.candidates[at].parent
    edits = []
    for node in reversed(chain):
        if node.parent is not None and node.section != section:
            continue
        version, text = text_of(node.entries, section)
        tried = journal.evaluations.get((node.id, f"minibatch-{node.iteration}"))
        feedback = tried.feedback_mean if tried is not None else None
        edits.append(Edit(version=version, text=text, reason=node.reason, feedback=feedback))
    return edits
