"""``redraft trace``: one task's evolution in the terminal, round by round, with coloured diffs.

It renders the same `TaskHistory` as the HTML page. Model text is printed as
`rich.text.Text`, never as markup: a candidate containing ``[bold]`` or
``[/]`` is shown as typed, and cannot break or restyle the output. Unknown
frame kinds and fields are printed as key/value lines, so nothing is hidden.
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

from redraft.history import Candidate, Round, TaskHistory, build_history, extra, frame_fields, request_news, usage_line
from redraft.runreader import Frame, RunReader

SEVERITY_STYLE = {"critical": "bold red", "major": "yellow", "minor": "dim"}


def show_trace(root: Path, task_id: str, console: Console) -> None:
    """Print the evolution of ``task_id`` in the run at ``root``; `UserError` if either is unknown."""
    reader = RunReader(root)
    entry = reader.find(task_id)
    history = build_history(task_id, reader.frames(entry))
    for renderable in render(history, entry.record):
        console.print(renderable)


def render(history: TaskHistory, record: dict[str, Any]) -> list[RenderableType]:
    out: list[RenderableType] = [_header(history, record)]
    steps = {s.round: s for s in history.best_steps()}
    for rnd in history.rounds:
        out.append(Rule(Text(f"round {rnd.number}", style="bold"), align="left"))
        out.extend(_round(rnd, history))
        step = steps.get(rnd.number)
        if step is not None and step.changed:
            out.append(Text("best candidate changed:", style="bold"))
            out.append(diff_text(step.diff))
        elif step is not None and rnd.number > 0:
            out.append(Text("best candidate unchanged", style="dim"))
    for frame in history.others:
        out.append(_generic_frame(frame))
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


def _header(history: TaskHistory, record: dict[str, Any]) -> RenderableType:
    passed = record.get("passed")
    verdict = Text("PASS", style="bold green") if passed else Text("FAIL", style="bold red")
    usage = record.get("usage") or {}
    summary = Text.assemble(
        verdict,
        f"  score {record.get('initial_score', 0.0):.3f} → {record.get('score', 0.0):.3f}",
        f" · {record.get('rounds', 0)} rounds · stop: {record.get('stop_reason', '?')}",
        f" · {usage.get('calls', 0)} calls, {usage.get('input_tokens', 0) + usage.get('output_tokens', 0):,} tokens,"
        f" ${usage.get('cost_usd', 0.0):.4f} · {record.get('wall_s', 0.0):.2f} s",
    )
    if record.get("error"):
        summary.append(f"\nerror: {record['error']}", style="red")
    prompt = (history.task or {}).get("prompt", "")
    return Panel(Group(summary, Text(""), Text(str(prompt))), title=Text(f"task {history.task_id}"), title_align="left")


def _round(rnd: Round, history: TaskHistory) -> list[RenderableType]:
    out: list[RenderableType] = []
    revision = next((r.get("revision") for r in rnd.requests if r.get("revision")), None)
    if isinstance(revision, dict) and revision.get("memory"):
        out.append(Text(f"revising from the best so far (score {revision.get('best_score', 0.0):.3f})", style="dim"))
    for kind, count, fields in request_news(rnd):
        if fields:
            out.append(_key_values(f"{kind} ×{count}", fields))
    best = history.best_of(rnd.decision) if rnd.decision else None
    for candidate in rnd.candidates:
        out.append(_candidate(candidate, is_best=candidate is best))
    for frame in rnd.others:
        out.append(_generic_frame(frame, ("task_id", "round")))
    if rnd.decision is not None:
        out.append(_decision(rnd.decision))
    return out


def _candidate(c: Candidate, *, is_best: bool) -> RenderableType:
    title = Text(f"sample {c.sample}")
    if c.stage:
        title.append(f" · stage {c.stage}")
    if c.verification is not None:
        title.append(f" · score {c.score:.3f} ")
        title.append("pass" if c.passed else "fail", style="green" if c.passed else "red")
        if c.verification.get("answer") is not None:
            title.append(f" · answer {c.verification['answer']}")
    if c.draft.get("node_id"):
        title.append(f" · node {str(c.draft['node_id'])[:8]}", style="dim")
    if is_best:
        title.append(" · best so far", style="bold cyan")
    body: list[RenderableType] = [Text(c.text)]
    if extra(c.draft):
        body.append(_key_values("draft", extra(c.draft)))
    if c.verification is not None:
        for check in c.verification.get("checks") or []:
            if isinstance(check, dict):
                mark = Text("✓ ", style="green") if check.get("passed") else Text("✗ ", style="red")
                body.append(Text.assemble(mark, f"{check.get('name')}: {check.get('detail', '')}"))
        for question in c.verification.get("questions") or []:
            if isinstance(question, dict):
                body.append(Text(f"? {question.get('question', '')}\n  → {question.get('answer', '')}", style="italic"))
        if extra(c.verification):
            body.append(_key_values("verification", extra(c.verification)))
    for critique in c.critiques:
        body.append(_critique(critique))
    body.extend(_generic_frame(f, ("task_id", "round", "sample")) for f in c.others)
    return Panel(Group(*body), title=title, title_align="left", border_style="cyan" if is_best else "dim")


def _critique(critique: Frame) -> RenderableType:
    issues = [i for i in critique.get("issues") or [] if isinstance(i, dict)]
    who = ", ".join(str(critique[k]) for k in ("stance", "model") if critique.get(k)) or "critic"
    head = Text(f"critique ({who}): {len(issues)} issue(s)", style="bold")
    parts: list[RenderableType] = [head]
    if critique.get("error"):
        parts.append(Text(f"  unusable reply: {critique['error']}", style="red"))
    if issues:
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
        for column in ("severity", "quote", "reason", "fix"):
            table.add_column(column)
        for issue in issues:
            severity = str(issue.get("severity", ""))
            table.add_row(
                Text(severity, style=SEVERITY_STYLE.get(severity, "")),
                Text(str(issue.get("quote", ""))),
                Text(str(issue.get("reason", ""))),
                Text(str(issue.get("fix", ""))),
            )
        parts.append(table)
    if extra(critique):
        parts.append(_key_values("critique", extra(critique)))
    return Group(*parts)


def _decision(decision: Frame) -> Text:
    action, reason = decision.get("action"), decision.get("reason")
    style = "bold red" if reason == "error" else "bold green" if action == "stop" else "bold blue"
    text = Text.assemble(
        Text(f"decision: {action}" + (f" ({reason})" if reason else ""), style=style),
        f" · best: round {decision.get('best_round')}, sample {decision.get('best_sample')},"
        f" score {decision.get('best_score', 0.0):.3f} · this round's best {decision.get('round_best_score', 0.0):.3f}",
    )
    if decision.get("rolled_back"):
        text.append(" · rolled back", style="yellow")
    if decision.get("detail"):
        text.append(f"\n  {decision['detail']}")
    for key, value in extra(decision).items():
        text.append(f"\n  {key}: {_plain(value)}")
    return text


def _generic_frame(frame: Frame, placed: tuple[str, ...] = ("task_id",)) -> RenderableType:
    fields = frame_fields(frame, placed)
    return _key_values(str(frame.get("kind", "?")), fields)


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
