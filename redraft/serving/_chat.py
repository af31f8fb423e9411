"""A request as a task of the engine: its messages made the task's prompt, under the scenario of its check.

A request that names no check is refined under `Conversation`, a scenario with no feedback of its own: the
critic's findings and the convergence protocol decide, as in any run whose checks say nothing. A request that
names one gets that check's scenario, and the check sees the request's messages as the task's prompt.
"""

from __future__ import annotations

from collections.abc import Iterator

from redraft.errors import UserError
from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios import Scenario
from redraft.serving._openai import ChatMessage

CHAT = "chat"
"""The scenario of a request that names no check (provided in each replica's process, never registered)."""

SYSTEM_PROMPT = "Answer the conversation's last message. Follow its instructions exactly."


class Conversation(Scenario):
    """A served request with no check: no feedback but the critic's."""

    name = CHAT
    check_cost = "instant"

    def tasks(self, *, seed: int) -> Iterator[Task]:
        raise UserError("the chat scenario has no tasks of its own: it is a served request's")

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def answer(self, text: str) -> str | None:
        normalised = " ".join(text.split())
        return normalised or None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        return []


def prompt_of(messages: list[ChatMessage]) -> str:
    """The task's prompt: a lone user message as it is; a conversation as its turns, each headed by its role."""
    if len(messages) == 1 and messages[0].role == "user":
        return messages[0].text()
    return "\n\n".join(f"[{message.role}]\n{message.text()}" for message in messages)
