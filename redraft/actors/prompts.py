"""The prompts the roles send to models. Bump `PROMPT_VERSION` when any text changes:
it is part of a run's fingerprint, so a resumed run never mixes two prompt versions.
"""

from __future__ import annotations

from redraft.protocols.messages import ChatMessage, Revision, Task

PROMPT_VERSION = "1"

CRITIC_SYSTEM = {
    "adversarial": (
        "You are an adversarial reviewer. Your only job is to find concrete faults in the "
        "candidate answer: wrong numbers, wrong steps, bugs, unmet requirements. Do not praise. "
        "For each fault, quote the exact wrong text, say why it is wrong and give the fix. "
        "Severity: critical if the final answer is wrong, major for a wrong step, minor otherwise. "
        'Reply only with JSON: {"issues": [{"severity": ..., "quote": ..., "reason": ..., "fix": ...}]}. '
        'If you find no fault, reply {"issues": []}.'
    ),
    "self": (
        "You wrote the answer below. Check it step by step and list every mistake you made. "
        'Reply only with JSON: {"issues": [{"severity": ..., "quote": ..., "reason": ..., "fix": ...}]} '
        '(severity is critical, major or minor); reply {"issues": []} if it is correct.'
    ),
}


def draft_messages(system: str, task: Task, revision: Revision | None) -> list[ChatMessage]:
    """The drafter's prompt: the task, and on revision the best so far with all feedback."""
    if revision is None:
        return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=task.prompt)]
    feedback = [f"- check {c.name} failed: {c.detail}" for c in revision.failed_checks]
    feedback += [f'- {i.severity}: "{i.quote}" is wrong: {i.reason} Fix: {i.fix}' for i in revision.issues]
    memory = [
        f"- attempt {a.round}: answer {a.answer if a.answer is not None else '(none)'}, "
        f"score {a.score:.2f}: {a.summary}"
        for a in revision.memory
    ]
    parts = [
        task.prompt,
        f"\nYour best answer so far (score {revision.best_score:.2f} of 1):\n---\n{revision.best_text}\n---",
    ]
    if feedback:
        parts.append("Problems found in it:\n" + "\n".join(feedback))
    if memory:
        parts.append("Earlier attempts, do not repeat their mistakes:\n" + "\n".join(memory))
    parts.append("Write a corrected, complete answer.")
    return [
        ChatMessage(role="system", content=system),
        ChatMessage(role="user", content="\n\n".join(parts)),
    ]


def critique_messages(stance: str, task: Task, candidate: str) -> list[ChatMessage]:
    """The critic's prompt for one candidate."""
    system = CRITIC_SYSTEM.get(stance, CRITIC_SYSTEM["adversarial"])
    user = f"Task:\n{task.prompt}\n\nCandidate answer:\n{candidate}"
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
