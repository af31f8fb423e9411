"""The prompts the roles send to models, built from the templates in ``prompts.toml``.

Invariants:

- Every text a model sees comes from a versioned template, and the versions of
  all templates in use (`Prompts.versions`) are part of a run's fingerprint, so a resumed run never
  mixes two versions of a prompt. Change a template's text, bump its version.
- Untrusted text (a candidate, failure output it controls, a task from a user's
  file, another model's words) reaches a prompt only through a template's ``data``
  field, which `fence` puts between a ``[BEGIN tag]`` and an ``[END tag]`` line,
  and the template says it is data. The tag is a keyed hash of the text itself, so
  the text cannot hold the line that closes its own fence (it would have to contain
  its own hash); being a function of the text, the same prompt is rebuilt the same
  way, and the response cache and seeded sampling still replay.
- What stays the same across a role's calls on one task (the system message, the instructions, the task
  and the template's words around it) comes first, and what changes (a candidate, feedback, a critique,
  a question) after it; each builder says where the stable part ends (`Prompt.stable_chars`), so a
  provider can cache it.
- Feedback that echoes the candidate (a check's detail, such as a failing test's
  output) is cut to `MAX_DETAIL_CHARS` per check and `MAX_FEEDBACK_CHARS` in all.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

from redraft.backends.base import ChatRequest
from redraft.protocols.messages import Attempt, ChatMessage, CheckResult, Issue, Revision, StageStep, Stance, Task

MAX_DETAIL_CHARS = 1_000
"""Characters of one check's detail in a prompt (the rest is cut, and the cut said)."""
MAX_FEEDBACK_CHARS = 4_000
"""Characters of a whole block of feedback lines in a prompt."""
MAX_MEMORY_CHARS = 300
"""Characters of each earlier attempt's answer, summary or reflection, and of each verification question."""

_TAG_LETTERS = "bcdfghjklmnpqrst"
"""A tag's 16 letters, one per half byte of the hash: no digits, which a model could take for numbers of the task."""
_FENCE = re.compile(rf"^\[BEGIN ([{_TAG_LETTERS}]{{24}})\]\n(.*?)\n\[END \1\]$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class _Template:
    version: int
    text: Template
    data: frozenset[str]
    """The fields that carry untrusted text: each is fenced."""


@dataclass(frozen=True)
class Prompts:
    """A set of templates: the built-in ones (`built_in`), or those with a prompts file's entries over them
    (`redraft.engine.prompt_files`). Plain data, so it travels to the role actors with their setup."""

    templates: dict[str, _Template]

    def render(self, template: str, /, **fields: object) -> str:
        """Template ``template`` with its ``$fields`` filled in, each ``data`` field fenced (a missing field is
        a bug: KeyError)."""
        entry = self.templates[template]
        return entry.text.substitute(
            **{k: fence(str(v), label=k) if k in entry.data else str(v) for k, v in fields.items()}
        )

    def stable_length(self, template: str, changing: Collection[str], /, **fields: object) -> int:
        """Characters of ``render(template, **fields)`` before the first of its ``changing`` fields (the whole
        rendering if it has none): the words and stable fields up to there. Found in the template, not in the
        text, so a prompts file that moves a changing field earlier moves the end with it."""
        entry = self.templates[template]
        source = entry.text.template
        end = len(source)
        for match in entry.text.pattern.finditer(source):
            if (match.group("named") or match.group("braced")) in changing:
                end = match.start()
                break
        head = _Template(entry.version, Template(source[:end]), entry.data)
        return len(Prompts({template: head}).render(template, **{k: v for k, v in fields.items() if k not in changing}))

    def versions(self) -> dict[str, int]:
        """The version of every template (part of the run fingerprint)."""
        return {name: t.version for name, t in sorted(self.templates.items())}


@dataclass(frozen=True)
class Prompt:
    """A role's prompt: its messages, and where the part that stays the same across a task's calls ends."""

    messages: list[ChatMessage]
    stable_chars: int
    """Leading characters of the last message that, with every message before it, are the stable prefix
    (`redraft.backends.base.ChatRequest.stable_chars`)."""

    def request(
        self,
        task_id: str,
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> ChatRequest:
        """A request of this prompt for task ``task_id``: its stable prefix marked, and the task's cache key."""
        return ChatRequest(
            messages=self.messages,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            json_schema=json_schema,
            stable_chars=self.stable_chars,
            cache_key=task_cache_key(task_id),
        )


def task_cache_key(task_id: str) -> str:
    """The provider cache key of a task's calls: a hash of its id (the id itself never leaves the run)."""
    return "redraft-" + hashlib.blake2b(task_id.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


@functools.cache
def built_in() -> Prompts:
    """The templates of ``prompts.toml``."""
    return templates_of("redraft.engine")


def templates_of(package: str, file: str = "prompts.toml") -> Prompts:
    """The templates of ``package``'s ``file``, in this file's format (a room with a role of its own, such as the
    judge's, keeps its prompts beside it and versioned the same way)."""
    data = tomllib.loads(resources.files(package).joinpath(file).read_text(encoding="utf-8"))
    return Prompts(
        {
            name: _Template(int(entry["version"]), Template(entry["text"]), frozenset(entry.get("data", [])))
            for name, entry in data.items()
        }
    )


def prompt_versions() -> dict[str, int]:
    """The version of every built-in prompt template."""
    return built_in().versions()


def render(template: str, /, **fields: object) -> str:
    """A built-in template rendered (see `Prompts.render`)."""
    return built_in().render(template, **fields)


def fence(text: str, *, label: str = "data") -> str:
    """``text`` between ``[BEGIN tag]`` and ``[END tag]`` lines, with a tag that ``text`` does not contain."""
    salt = 0
    while True:  # a text holding its own tag would need a hash fixed point; the loop only makes it certain
        key = f"redraft-fence\0{label}\0{salt}".encode()
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=key[:64], digest_size=12).digest()
        tag = "".join(_TAG_LETTERS[b >> 4] + _TAG_LETTERS[b & 15] for b in digest)
        if tag not in text:
            return f"[BEGIN {tag}]\n{text}\n[END {tag}]"
        salt += 1


def fenced(prompt: str) -> list[str]:
    """The texts fenced in a rendered prompt, in order (for tests and tools that read prompts)."""
    return [match[2] for match in _FENCE.finditer(prompt)]


def cut(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, saying how much was cut."""
    return text if len(text) <= limit else f"{text[:limit]} [... {len(text) - limit:,} more characters cut]"


def critic_system(stance: Stance, prompts: Prompts | None = None) -> str:
    """The critic's instructions for ``stance``: the template ``critic_<stance>`` (every stance has one)."""
    return (prompts or built_in()).render(f"critic_{stance}")


def draft_messages(
    system: str,
    task: Task,
    revision: Revision | None,
    *,
    stage: StageStep | None = None,
    patch: bool = False,
    prompts: Prompts | None = None,
) -> Prompt:
    """The drafter's prompt: the task (its stable prefix), then the stage, and on revision the best so far
    with all feedback."""
    prompts = prompts or built_in()
    parts = [prompts.render("draft_task", task=task.prompt)]
    if stage is not None:
        parts.append(
            prompts.render(
                "stage", number=stage.index + 1, total=stage.total, name=stage.name, instruction=stage.instruction
            )
        )
        if stage.previous:
            parts.append(prompts.render("stage_previous", name="previous stage", text=stage.previous))
    if revision is not None:
        parts += _revision_parts(revision, patch=patch, prompts=prompts)
    return Prompt(
        [ChatMessage(role="system", content=system), ChatMessage(role="user", content="\n\n".join(parts))],
        stable_chars=len(parts[0]),
    )


def _revision_parts(revision: Revision, *, patch: bool, prompts: Prompts) -> list[str]:
    feedback = [f"- check {c.name} failed: {cut(c.detail, MAX_DETAIL_CHARS)}" for c in revision.failed_checks]
    feedback += [issue_line(i) for i in revision.issues]
    parts = [prompts.render("revise_best", score=f"{revision.best_score:.2f}", text=revision.best_text)]
    if feedback:
        parts.append(prompts.render("revise_problems", feedback=cut("\n".join(feedback), MAX_FEEDBACK_CHARS)))
    if revision.questions:
        qa = [
            f"- Q: {cut(q.question, MAX_MEMORY_CHARS)}\n  A: {cut(q.answer, MAX_MEMORY_CHARS)}"
            for q in revision.questions
        ]
        parts.append(prompts.render("revise_questions", questions=cut("\n".join(qa), MAX_FEEDBACK_CHARS)))
    if revision.memory:
        memory = "\n".join(_memory_line(a) for a in revision.memory)
        parts.append(prompts.render("revise_memory", memory=cut(memory, MAX_FEEDBACK_CHARS)))
    parts.append(prompts.render("revise_patch" if patch else "revise_rewrite"))
    return parts


def _memory_line(attempt: Attempt) -> str:
    answer = cut(attempt.answer, MAX_MEMORY_CHARS) if attempt.answer is not None else "(none)"
    summary = cut(attempt.summary, MAX_MEMORY_CHARS)
    line = f"- attempt {attempt.round}: answer {answer}, score {attempt.score:.2f}: {summary}"
    return line + (f" Reflection: {cut(attempt.reflection, MAX_MEMORY_CHARS)}" if attempt.reflection else "")


def issue_line(issue: Issue) -> str:
    return f'- {issue.severity}: "{issue.quote}" is wrong: {issue.reason} Fix: {issue.fix}'


def critique_messages(
    stance: Stance, task: Task, candidate: str, opponent: list[Issue] | None = None, prompts: Prompts | None = None
) -> Prompt:
    """The critic's prompt for one candidate (with the other critic's last issues, in a debate): stable up to
    the candidate."""
    prompts = prompts or built_in()
    user = prompts.render("critic_user", task=task.prompt, candidate=candidate)
    if opponent:
        issues = cut("\n".join(issue_line(i) for i in opponent), MAX_FEEDBACK_CHARS)
        user += "\n\n" + prompts.render("debate_opponent", issues=issues)
    return Prompt(
        [ChatMessage(role="system", content=critic_system(stance, prompts)), ChatMessage(role="user", content=user)],
        stable_chars=prompts.stable_length("critic_user", {"candidate"}, task=task.prompt, candidate=candidate),
    )


def reflect_messages(
    task: Task, attempt: str, failed_checks: list[CheckResult], prompts: Prompts | None = None
) -> Prompt:
    """Ask the drafter's model to diagnose its failed attempt (Reflexion): stable up to the attempt."""
    prompts = prompts or built_in()
    lines = [f"- {c.name}: {cut(c.detail, MAX_DETAIL_CHARS)}" for c in failed_checks]
    fields = {"task": task.prompt, "attempt": attempt, "feedback": cut("\n".join(lines), MAX_FEEDBACK_CHARS)}
    fields["feedback"] = fields["feedback"] or "- it did not pass"
    return Prompt(
        [
            ChatMessage(role="system", content=prompts.render("reflect_system")),
            ChatMessage(role="user", content=prompts.render("reflect_user", **fields)),
        ],
        stable_chars=prompts.stable_length("reflect_user", {"attempt", "feedback"}, **fields),
    )


def question_messages(task: Task, candidate: str, count: int, prompts: Prompts | None = None) -> Prompt:
    """Ask the verifier's model for chain-of-verification questions about a candidate: stable up to it."""
    prompts = prompts or built_in()
    fields = {"task": task.prompt, "candidate": candidate}
    return Prompt(
        [
            ChatMessage(role="system", content=prompts.render("cove_plan", count=count)),
            ChatMessage(role="user", content=prompts.render("critic_user", **fields)),
        ],
        stable_chars=prompts.stable_length("critic_user", {"candidate"}, **fields),
    )


def answer_messages(task: Task, question: str, prompts: Prompts | None = None) -> Prompt:
    """Ask one verification question with the task for context, never the candidate (factored CoVe): stable
    up to the question."""
    prompts = prompts or built_in()
    fields = {"task": task.prompt, "question": question}
    return Prompt(
        [
            ChatMessage(role="system", content=prompts.render("cove_answer")),
            ChatMessage(role="user", content=prompts.render("cove_question", **fields)),
        ],
        stable_chars=prompts.stable_length("cove_question", {"question"}, **fields),
    )
