"""``redraft trace``: one task's evolution in the terminal, round by round, with coloured diffs (and a
plan's versions, each as a diff from the one before).

It renders the same `TaskHistory` as the HTML page. Model text is printed as
`rich.text.Text`, never as markup: a candidate containing ``[bold]`` or
``[/]`` is shown as typed, and cannot break or restyle the output. Frames of
unknown kinds and unknown fields are printed as key/value lines, so nothing is
hidden.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from redraft.protocols.messages import ChatMessage, Critique, Decision, Draft, PlanVersion, Result, Verification
from redraft.rundir import Frame, KnownFrame, RunReader, TaskHistory, build_history
from redraft.rundir.history import DraftEntry, Round
from redraft.views._fields import (
    TRACE_LOST,
    extra,
    frame_fields,
    request_news,
    revision_of,
    task_lead,
    usage_line,
)

SEVERITY_STYLE = {"critical": "bold red", "major": "yellow", "minor": "dim"}


def show_trace(root: Path, task_id: str, console: Console, *, messages: bool = False) -> None:
    """Print the evolution of ``task_id`` in the run at ``root``; `UserError` if either is unknown.

    The roles' system prompts are shown once, under the task; ``messages`` shows every message each model
    call was sent, under its candidate or critique.
    """
    reader = RunReader(root)
    entry = reader.find(task_id)
    frames = reader.trace_of(entry)
    history = build_history(task_id, frames or [])
    for renderable in render(history, entry.result, messages=messages):
        console.print(renderable)
    if frames is None:
        console.print(Text(f"{TRACE_LOST}; its result above stands", style="yellow"))


def render(history: TaskHistory, result: Result, *, messages: bool = False) -> list[RenderableType]:
    out: list[RenderableType] = [_header(history, result), *_system_prompts(history), *_plans(history)]
    steps = {s.round: s for s in history.best_steps()}
    for rnd in history.rounds:
        out.append(Rule(Text(f"round {rnd.number}", style="bold"), align="left"))
        out.extend(_round(rnd, history, messages=messages))
        step = steps.get(rnd.number)
        if step is not None and step.changed:
            out.append(Text("best candidate changed:", style="bold"))
            out.append(diff_text(step.diff))
        elif step is not None and rnd.number > 0:
            out.append(Text("best candidate unchanged", style="dim"))
    out.extend(_generic_frame(frame) for frame in history.others)
    return out


def diff_text(lines: list[str]) -> Text:
    text = Text()
    for line in lines:
        style = (
            "magenta"
            if line.startswith("@@")
            else "bold"
            if line.startswith(("+++", "---"))
            else "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else ""
        )
        text.append(line + "\n", style=style)
    return text


def _header(history: TaskHistory, r: Result) -> RenderableType:
    lead = task_lead(r, history.grade.message if history.grade else None)  # the held-out grade first, as the page
    verdict = Text("PASS", style="bold green") if lead.passed else Text("FAIL", style="bold red")
    limit = f" ({r.stop_limit})" if r.stop_limit else ""
    summary = Text.assemble(
        verdict,
        f" ({lead.basis}): {lead.said}",
        f"\nfeedback (the loop's verdict): {'pass' if r.passed else 'fail'}",
        f" · score {r.initial_score:.3f} → {r.score:.3f} · {r.rounds} rounds · stop: {r.stop_reason}{limit}",
        f" · {r.usage.calls} calls, {r.usage.total_tokens:,} tokens, ${r.usage.cost_usd:.4f} · {r.wall_s:.2f} s",
    )
    if r.error:
        summary.append(f"\nerror: {r.error}", style="red")
    if r.traceback:
        summary.append(f"\n{r.traceback.rstrip()}", style="dim red")
    if history.grade is not None and history.grade.message.error:
        summary.append(f"\nthe grade failed: {history.grade.message.error}", style="red")
    prompt = history.task.message.prompt if history.task is not None else ""
    return Panel(Group(summary, Text(""), Text(prompt)), title=Text(f"task {history.task_id}"), title_align="left")


def _plans(history: TaskHistory) -> list[RenderableType]:
    """Every version of the task's plan (``plan_execute``): why it changed, after which step, and the diff."""
    out: list[RenderableType] = []
    for change in history.plan_changes():
        plan = change.plan
        after = f" after step {plan.trigger_step}" if plan.trigger_step is not None else ""
        out.append(Rule(Text(f"plan v{plan.version} (round {plan.round}{after})", style="bold"), align="left"))
        out.append(Text.assemble(("why: ", "bold"), plan.reason))
        moves = [f"{name} {numbers}" for name, numbers in _moves(plan) if numbers]
        if moves:
            out.append(Text(" · ".join(moves), style="dim"))
        out.append(diff_text(change.diff) if change.diff else Text("\n".join(change.lines)))
    return out


def _moves(plan: PlanVersion) -> list[tuple[str, list[int]]]:
    return [("added", plan.added), ("removed", plan.removed), ("changed", plan.changed), ("kept verified", plan.kept)]


def _system_prompts(history: TaskHistory) -> list[RenderableType]:
    """Each role's system prompt, once: what its model was told to be (a user's own included)."""
    said: dict[str, str] = {}
    for rnd in history.rounds:
        for c in rnd.candidates:
            said.setdefault("drafter", _system(c.draft.message.messages))
            for critique in c.critiques:
                stance = critique.message.stance or "critic"
                said.setdefault(f"critic ({stance})", _system(critique.message.messages))
    return [Text.assemble((f"{role}'s system prompt: ", "bold"), text) for role, text in said.items() if text]


def _system(messages: list[ChatMessage]) -> str:
    return next((m.content for m in messages if m.role == "system"), "")


def _messages(messages: list[ChatMessage], whose: str) -> list[RenderableType]:
    out: list[RenderableType] = [Text(f"{whose} was sent:", style="dim bold")]
    out += [Text.assemble((f"  [{m.role}] ", "dim"), m.content) for m in messages]
    return out


def _round(rnd: Round, history: TaskHistory, *, messages: bool = False) -> list[RenderableType]:
    out: list[RenderableType] = []
    revision = revision_of(rnd)
    if revision is not None and revision.memory:
        out.append(Text(f"revising from the best so far (score {revision.best_score:.3f})", style="dim"))
    out.extend(_key_values(f"{kind} ×{count}", fields) for kind, count, fields in request_news(rnd))
    best = history.best_of(rnd.decision.message) if rnd.decision else None
    out.extend(_candidate(candidate, is_best=candidate is best, messages=messages) for candidate in rnd.candidates)
    out.extend(_generic_frame(frame, ("task_id", "round")) for frame in rnd.others)
    if rnd.decision is not None:
        out.append(_decision(rnd.decision))
    return out


def _candidate(c: DraftEntry, *, is_best: bool, messages: bool = False) -> RenderableType:
    title = Text(f"sample {c.sample}")
    if c.stage:
        title.append(f" · stage {c.stage}")
    if c.verification is not None:
        title.append(f" · score {c.verification.message.score:.3f} ")
        title.append("pass" if c.passed else "fail", style="green" if c.passed else "red")
        if c.verification.message.answer is not None:
            title.append(f" · answer {c.verification.message.answer}")
    if c.draft.message.node_id:
        title.append(f" · node {c.draft.message.node_id[:8]}", style="dim")
    if c.grade is not None:
        title.append(" · held-out grade ")
        title.append("pass" if c.grade.passed else "fail", style="green" if c.grade.passed else "red")
    if is_best:
        title.append(" · best so far", style="bold cyan")
    body: list[RenderableType] = [Text(c.text), *_draft_notes(c.draft)]
    if messages and c.draft.message.messages:
        body += _messages(c.draft.message.messages, "the drafter's model")
    if c.grade is not None and c.grade.detail:
        body.append(Text(f"grade: {c.grade.detail}", style="dim"))
    if c.verification is not None:
        body.extend(_verification(c.verification))
    for critique in c.critiques:
        body.append(_critique(critique))
        if messages and critique.message.messages:
            body += _messages(critique.message.messages, "the critic's model")
    body.extend(_generic_frame(f, ("task_id", "round", "sample")) for f in c.others)
    return Panel(Group(*body), title=title, title_align="left", border_style="cyan" if is_best else "dim")


def _draft_notes(frame: KnownFrame[Draft]) -> list[RenderableType]:
    draft, notes = frame.message, list[RenderableType]()
    if draft.edits_applied or draft.edit_errors:
        notes.append(Text(f"patch: {draft.edits_applied} edit(s) applied", style="dim"))
        notes.extend(Text(f"  ✗ {error}", style="yellow") for error in draft.edit_errors)
    if extra(frame):
        notes.append(_key_values("draft", extra(frame)))
    return notes


def _verification(frame: KnownFrame[Verification]) -> list[RenderableType]:
    v, out = frame.message, list[RenderableType]()
    for check in v.checks:
        mark = Text("✓ ", style="green") if check.passed else Text("✗ ", style="red")
        out.append(Text.assemble(mark, f"{check.name}: {check.detail}"))
    out.extend(Text(f"? {q.question}\n  → {q.answer}", style="italic") for q in v.questions)
    if v.observation is not None:  # a plan step's run: what it wrote, as the next move saw it
        out.append(Text("\n".join(v.observation.lines()), style="dim"))
    if v.usage.calls:
        by = f" by {v.model}" if v.model else ""
        out.append(Text(f"questions asked{by}: {usage_line(v.usage)}", style="dim"))
    if extra(frame):
        out.append(_key_values("verification", extra(frame)))
    return out


def _critique(frame: KnownFrame[Critique]) -> RenderableType:
    critique = frame.message
    who = ", ".join(w for w in (critique.stance, critique.model) if w) or "critic"
    parts: list[RenderableType] = [Text(f"critique ({who}): {len(critique.issues)} issue(s)", style="bold")]
    if critique.error:
        parts.append(Text(f"  unusable reply: {critique.error}", style="red"))
    if critique.issues:
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
        for column in ("severity", "quote", "reason", "fix"):
            table.add_column(column)
        for issue in critique.issues:
            table.add_row(
                Text(issue.severity, style=SEVERITY_STYLE.get(issue.severity, "")),
                Text(issue.quote),
                Text(issue.reason),
                Text(issue.fix),
            )
        parts.append(table)
    if extra(frame):
        parts.append(_key_values("critique", extra(frame)))
    return Group(*parts)


def _decision(frame: KnownFrame[Decision]) -> Text:
    d = frame.message
    style = "bold red" if d.reason == "error" else "bold green" if d.action == "stop" else "bold blue"
    reason = f" ({d.reason}{': ' + d.limit if d.limit else ''})" if d.reason else ""
    text = Text.assemble(
        Text(f"decision: {d.action}{reason}", style=style),
        f" · best: round {d.best_round}, sample {d.best_sample}, score {d.best_score:.3f}"
        f" · this round's best {d.round_best_score:.3f}",
    )
    if d.rolled_back:
        text.append(" · rolled back", style="yellow")
    if d.detail:
        text.append(f"\n  {d.detail}")
    for key, value in extra(frame).items():
        text.append(f"\n  {key}: {_plain(value)}")
    return text


def _generic_frame(frame: Frame, placed: tuple[str, ...] = ("task_id",)) -> RenderableType:
    return _key_values(frame.kind, frame_fields(frame, placed))


def _key_values(title: str, values: dict[str, Any]) -> Text:
    text = Text(f"{title}:", style="bold")
    if all(isinstance(v, str | int | float) and len(str(v)) < 40 for v in values.values()) and len(values) <= 3:
        text.append(" " + ", ".join(f"{k}={v}" for k, v in values.items()), style="dim")  # short: one line
        return text
    for key, value in values.items():
        text.append(f"\n  {key}: ", style="dim")
        text.append(_plain(value))
    return text


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    if (line := usage_line(value)) is not None:
        return line
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)
