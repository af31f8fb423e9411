"""The drafter's prompts for a plan executed step by step (``plan_execute``): the plan, a step's program, the
decision after a step ran. Every text a model or a program wrote reaches them fenced as data.
"""

from __future__ import annotations

from collections.abc import Sequence

from redraft.engine.prompts import MAX_DETAIL_CHARS, MAX_FEEDBACK_CHARS, Prompt, Prompts, built_in, cut
from redraft.protocols.messages import ChatMessage, CheckResult, Observation, PlanAsk, PlanStep, Task

MAX_CODE_CHARS = 6_000
"""Characters of a failed step's program shown again."""


def plan_messages(system: str, task: Task, ask: PlanAsk, prompts: Prompts | None = None) -> Prompt:
    """The drafter's prompt for ``ask``: the task (the stable prefix, under the system message of its kind of
    ask: the plan's for a plan or a decision, the scenario's for a step's program), the plan as it stands,
    what its steps produced, and the question (the first plan, a step's program, or the next move after an
    observation)."""
    prompts = prompts or built_in()
    parts = [prompts.render("draft_task", task=task.prompt)]
    if ask.steps:
        parts.append(prompts.render("plan_current", plan=plan_text(ask.steps, ask.verified)))
    seen = [o for o in ask.observations if o.step != ask.step]
    if seen:
        parts.append(prompts.render("plan_observed", observations=cut(observed(seen), MAX_FEEDBACK_CHARS)))
    step = next((s for s in ask.steps if s.number == ask.step), None)
    if ask.kind == "plan":
        parts.append(prompts.render("plan_make"))
    elif ask.kind == "step":
        assert step is not None, "a step's program is asked for a step of the plan"
        parts.append(prompts.render("plan_step", step=step_line(step, ask.verified)))
        if ask.code:
            feedback = cut(_feedback(ask.observations, ask.step, ask.checks), MAX_FEEDBACK_CHARS)
            parts.append(prompts.render("plan_retry", code=cut(ask.code, MAX_CODE_CHARS), feedback=feedback))
    else:
        event = f"step {ask.step} ran" if step is not None else "the whole program (every verified step in turn) ran"
        feedback = _feedback(ask.observations, ask.step, ask.checks) or "- every check passed"
        parts.append(prompts.render("plan_decide", feedback=cut(f"{event}:\n{feedback}", MAX_FEEDBACK_CHARS)))
    own = system if ask.kind == "step" else prompts.render("plan_system")
    return Prompt(
        [ChatMessage(role="system", content=own), ChatMessage(role="user", content="\n\n".join(parts))],
        stable_chars=len(parts[0]),
    )


def plan_text(steps: list[PlanStep], verified: list[int]) -> str:
    return "\n".join(step_line(s, verified) for s in steps)


def step_line(step: PlanStep, verified: Sequence[int] = ()) -> str:
    """``2. [verified] parse the dates; reads a.csv -> writes dates.csv (columns: id, date; date: date; 1.. rows)``."""
    state = "verified" if step.number in verified else "to do"
    return f"{step.number}. [{state}] {step.summary()}"


def observed(observations: list[Observation]) -> str:
    return "\n".join(observation_text(o) for o in observations)


def observation_text(o: Observation) -> str:
    """One step's run as lines (`Observation.lines`); the prompt cuts the whole block it is in."""
    return "\n".join(o.lines())


def _feedback(observations: list[Observation], step: int | None, checks: list[CheckResult]) -> str:
    lines = [observation_text(o) for o in observations if o.step == step][-1:]
    lines += [f"- check {c.name} failed: {cut(c.detail, MAX_DETAIL_CHARS)}" for c in checks if not c.passed]
    return "\n".join(lines)
