"""The steps of a top-down (``stepwise``) solution: outline, then draft, then polish.

A scenario may declare its own stages; strategies read them and send each as a
`StageStep` in a `DraftRequest`. Plain data, shared by scenarios and strategies.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    """One step of a top-down solution.

    The last stage's output is the candidate answer, judged by the scenario's
    check; every earlier stage is judged by its stage check before the next starts.
    """

    name: str
    """Short identifier, e.g. ``outline``; unique within a scenario's stages."""
    instruction: str
    """What the drafter must write at this stage (shown with the previous stage's verified output)."""


DEFAULT_STAGES = (
    Stage("outline", "Write a short numbered outline of the steps or points of your answer. Do not write the answer."),
    Stage("draft", "Write the complete answer, following the outline."),
    Stage("polish", "Check the answer against every requirement of the task and return the corrected final answer."),
)
"""Stages of a scenario that declares none. Only the last is judged by the scenario's own check."""
