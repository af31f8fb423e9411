"""The prompts the roles send to models, built from the templates in ``prompts.toml``.

Invariant: every text a model sees comes from a versioned template, and
`prompt_versions` (all templates' versions) is part of a run's fingerprint, so a
resumed run never mixes two versions of a prompt. Change a template's text, bump
its version.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from string import Template

from redraft.protocols.messages import ChatMessage, CheckResult, Issue, Revision, StageStep, Task


@functools.cache
def _templates() -> dict[str, tuple[int, Template]]:
    data = tomllib.loads(resources.files("redraft.actors").joinpath("prompts.toml").read_text(encoding="utf-8"))
    return {name: (int(entry["version"]), Template(entry["text"])) for name, entry in data.items()}


def prompt_versions() -> dict[str, int]:
    """The version of every prompt template (part of the run fingerprint)."""
    return {name: version for name, (version, _) in sorted(_templates().items())}


def render(template: str, /, **fields: object) -> str:
    """Template ``template`` with its ``$fields`` filled in (a missing field is a bug: KeyError)."""
    return _templates()[template][1].substitute(**{k: str(v) for k, v in fields.items()})


def critic_system(stance: str) -> str:
    """The critic's instructions for ``stance`` (``adversarial``, ``self`` or ``skeptic``)."""
    name = f"critic_{stance}"
    return render(name if name in _templates() else "critic_adversarial")


def draft_messages(
    system: str, task: Task, revision: Revision | None, *, stage: StageStep | None = None, patch: bool = False
) -> list[ChatMessage]:
    """The drafter's prompt: the task (and stage), and on revision the best so far with all feedback."""
    parts = [task.prompt]
    if stage is not None:
        parts.append(
            render("stage", number=stage.index + 1, total=stage.total, name=stage.name, instruction=stage.instruction)
        )
        if stage.previous:
            parts.append(render("stage_previous", name="previous stage", text=stage.previous))
    if revision is not None:
        parts += _revision_parts(revision, patch=patch)
    return [
        ChatMessage(role="system", content=system),
        ChatMessage(role="user", content="\n\n".join(parts)),
    ]


def _revision_parts(revision: Revision, *, patch: bool) -> list[str]:
    feedback = [f"- check {c.name} failed: {c.detail}" for c in revision.failed_checks]
    feedback += [issue_line(i) for i in revision.issues]
    memory = [
        f"- attempt {a.round}: answer {a.answer if a.answer is not None else '(none)'}, "
        f"score {a.score:.2f}: {a.summary}" + (f" Reflection: {a.reflection}" if a.reflection else "")
        for a in revision.memory
    ]
    parts = [render("revise_best", score=f"{revision.best_score:.2f}", text=revision.best_text)]
    if feedback:
        parts.append(render("revise_problems") + "\n" + "\n".join(feedback))
    if revision.questions:
        qa = [f"- Q: {q.question}\n  A: {q.answer}" for q in revision.questions]
        parts.append(render("revise_questions") + "\n" + "\n".join(qa))
    if memory:
        parts.append(render("revise_memory") + "\n" + "\n".join(memory))
    parts.append(render("revise_patch" if patch else "revise_rewrite"))
    return parts


def issue_line(issue: Issue) -> str:
    return f'- {issue.severity}: "{issue.quote}" is wrong: {issue.reason} Fix: {issue.fix}'


def critique_messages(
    stance: str, task: Task, candidate: str, opponent: list[Issue] | None = None
) -> list[ChatMessage]:
    """The critic's prompt for one candidate (with the other critic's last issues, in a debate)."""
    user = render("critic_user", task=task.prompt, candidate=candidate)
    if opponent:
        user += "\n\n" + render("debate_opponent", issues="\n".join(issue_line(i) for i in opponent))
    return [ChatMessage(role="system", content=critic_system(stance)), ChatMessage(role="user", content=user)]


def reflect_messages(task: Task, attempt: str, failed_checks: list[CheckResult]) -> list[ChatMessage]:
    """Ask the drafter's model to diagnose its failed attempt (Reflexion)."""
    feedback = "\n".join(f"- {c.name}: {c.detail}" for c in failed_checks) or "- it did not pass"
    return [
        ChatMessage(role="system", content=render("reflect_system")),
        ChatMessage(role="user", content=render("reflect_user", task=task.prompt, attempt=attempt, feedback=feedback)),
    ]


def question_messages(task: Task, candidate: str, count: int) -> list[ChatMessage]:
    """Ask the verifier's model for chain-of-verification questions about a candidate."""
    return [
        ChatMessage(role="system", content=render("cove_plan", count=count)),
        ChatMessage(role="user", content=render("critic_user", task=task.prompt, candidate=candidate)),
    ]


def answer_messages(task: Task, question: str) -> list[ChatMessage]:
    """Ask one verification question with the task for context, never the candidate (factored CoVe)."""
    return [
        ChatMessage(role="system", content=render("cove_answer")),
        ChatMessage(role="user", content=f"Context:\n{task.prompt}\n\nQuestion: {question}"),
    ]
