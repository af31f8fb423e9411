"""HTML pieces of the report, and the page of one task (its evolution round by round).

Every string that comes from a run (model text, check details, critiques, task
ids, unknown fields) goes through `esc` before it reaches the page: model output
is untrusted, and a ``<script>`` in a candidate must show as text. Pages are
self-contained (inline CSS, no script, no network). Frames of unknown kinds and
unknown fields of known kinds are shown as key/value tables (`generic`), so a
newer trace renders without loss.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

from redraft.history import BestStep, Candidate, Round, TaskHistory, extra, frame_fields, request_news, usage_line
from redraft.runreader import Frame

CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1d2733;
 margin:0 auto;max-width:1180px;padding:18px 28px 40px;background:#fbfcfd}
h1{font-size:22px;margin:6px 0 4px}h2{font-size:18px;margin:26px 0 8px;border-bottom:1px solid #dde3ea;
 padding-bottom:4px}h3{font-size:15px;margin:14px 0 6px}
a{color:#2f6db5;text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #dde3ea;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#eef2f6;font-weight:600}tbody tr:nth-child(even){background:#f5f7fa}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f3f5f8;border:1px solid #dde3ea;border-radius:4px;padding:8px 10px;margin:4px 0 8px;
 white-space:pre-wrap;word-break:break-word;font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.muted{color:#66727f}.pass{color:#18794e;font-weight:600}.fail{color:#b42318;font-weight:600}
.card{background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:8px 12px;margin:8px 0}
.card.best{border-color:#2f6db5;box-shadow:0 0 0 1px #2f6db5}
.decision{background:#eef4fb;border-left:4px solid #2f6db5;padding:6px 12px;margin:8px 0}
.decision.stop{border-left-color:#18794e}.decision.error{border-left-color:#b42318;background:#fdf1f0}
.diff .add{background:#e6f6ea;color:#135c2d;display:block}.diff .del{background:#fbeaea;color:#8c1c13;display:block}
.diff .hunk{color:#6b4fbb;display:block}.grid{display:flex;flex-wrap:wrap;gap:14px}
.grid figure{margin:0;background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:6px}
.kv th{white-space:nowrap}.sev-critical{color:#b42318;font-weight:600}.sev-major{color:#b54708}
nav{font-size:13px;margin-bottom:6px}details{margin:4px 0}summary{cursor:pointer;color:#43505d}
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def head(title: str) -> str:
    """The start of a self-contained HTML document, up to and including ``<body>``."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n"
    )


def page(title: str, body: str, *, script: str = "") -> str:
    """A whole self-contained HTML document."""
    return f"{head(title)}{body}\n{script}</body></html>\n"


def table_head(header: Sequence[str], numeric: Iterable[int] = ()) -> str:
    nums = set(numeric)
    cells = "".join(f'<th class="num">{h}</th>' if i in nums else f"<th>{h}</th>" for i, h in enumerate(header))
    return f"<table><thead><tr>{cells}</tr></thead><tbody>"


def table_row(cells: Sequence[str], numeric: Iterable[int] = ()) -> str:
    nums = set(numeric)
    return (
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in nums else f"<td>{c}</td>" for i, c in enumerate(cells))
        + "</tr>"
    )


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Iterable[int] = ()) -> str:
    """A table of already-escaped cells; ``numeric`` columns are right-aligned."""
    nums = set(numeric)
    return table_head(header, nums) + "".join(table_row(r, nums) for r in rows) + "</tbody></table>"


def generic(value: Any) -> str:
    """Any decoded MessagePack value as HTML: dicts as key/value tables, long text as <pre>."""
    if isinstance(value, dict):
        if not value:
            return '<span class="muted">{}</span>'
        if (line := usage_line(value)) is not None:
            return esc(line)
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{generic(v)}</td></tr>" for k, v in value.items())
        return f'<table class="kv">{rows}</table>'
    if isinstance(value, list):
        if not value:
            return '<span class="muted">[]</span>'
        if all(not isinstance(v, dict | list) for v in value):
            return esc(", ".join(json.dumps(v) if not isinstance(v, str) else v for v in value))
        return "".join(f"<div>{generic(v)}</div>" for v in value)
    if isinstance(value, bytes):
        return f'<span class="muted">{len(value)} bytes</span>'
    if isinstance(value, str) and ("\n" in value or len(value) > 120):
        return f"<pre>{esc(value)}</pre>"
    return esc(value)


def verdict(passed: bool | None) -> str:
    if passed is None:
        return '<span class="muted">unchecked</span>'
    return '<span class="pass">pass</span>' if passed else '<span class="fail">fail</span>'


def diff_html(lines: Sequence[str]) -> str:
    """A unified diff, coloured line by line."""
    out = []
    for line in lines:
        cls = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else ""
        )
        out.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line) + "\n")
    return f'<pre class="diff">{"".join(out)}</pre>'


def score(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else esc(value)


# ---------------------------------------------------------------- one task's page


def task_page(history: TaskHistory, record: dict[str, Any], *, back: str = "../report.html") -> str:
    """The page of one task: its result, prompt, then every round and the best candidate's diffs."""
    task_id = history.task_id
    parts = [
        f'<nav><a href="{esc(back)}">← run report</a> · <a href="index.html">all tasks</a></nav>',
        f"<h1>Task {esc(task_id)}</h1>",
        _result_summary(record),
    ]
    task = history.task or {}
    if "prompt" in task:
        parts.append(f"<h2>Prompt</h2><pre>{esc(task['prompt'])}</pre>")
    if task.get("reference"):
        parts.append(
            f"<details><summary>reference (hidden from the models)</summary>{generic(task['reference'])}</details>"
        )
    if extra(task):
        parts.append(f"<h3>Other task fields</h3>{generic(extra(task))}")
    best_steps = {s.round: s for s in history.best_steps()}
    for rnd in history.rounds:
        parts.append(_round(rnd, history, best_steps.get(rnd.number)))
    if history.others:
        parts.append("<h2>Other frames</h2>" + "".join(_other(f) for f in history.others))
    if record.get("text"):
        parts.append(f"<h2>Final answer (best candidate)</h2><pre>{esc(record['text'])}</pre>")
    return page(f"redraft · {task_id}", "\n".join(parts))


def _result_summary(record: dict[str, Any]) -> str:
    usage = record.get("usage") or {}
    rows = [
        (
            "result",
            f"{verdict(record.get('passed'))} · score {score(record.get('initial_score'))} → "
            f"{score(record.get('score'))} (round 0 {verdict(record.get('initial_passed'))})",
        ),
        ("answer", esc(record.get("answer"))),
        ("rounds", esc(record.get("rounds"))),
        ("stop reason", esc(record.get("stop_reason"))),
        (
            "usage",
            esc(
                f"{usage.get('calls', 0)} calls, {usage.get('input_tokens', 0):,} in / "
                f"{usage.get('output_tokens', 0):,} out tokens, ${usage.get('cost_usd', 0.0):.4f}"
            ),
        ),
        ("wall time", esc(f"{record.get('wall_s', 0.0):.2f} s")),
    ]
    if record.get("error"):
        rows.append(("error", f'<span class="fail">{esc(record["error"])}</span>'))
    return '<table class="kv">' + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _round(rnd: Round, history: TaskHistory, step: BestStep | None) -> str:
    decision = rnd.decision
    best = history.best_of(decision) if decision else None
    parts = [f'<h2 id="round-{rnd.number}">Round {rnd.number}</h2>']
    revision = next((r.get("revision") for r in rnd.requests if r.get("revision")), None)
    if revision:
        parts.append(f"<details><summary>what the drafter was told (revision)</summary>{generic(revision)}</details>")
    news = [(kind, n, fields) for kind, n, fields in request_news(rnd) if fields]
    if news:
        rows = [[esc(kind), str(n), generic(fields)] for kind, n, fields in news]
        parts.append(f"<details><summary>requests</summary>{table(['kind', 'sent', 'fields'], rows)}</details>")
    parts.extend(_candidate(c, rnd.number, is_best=c is best) for c in rnd.candidates)
    parts.extend(_other(f, ("task_id", "round")) for f in rnd.others)
    if decision is not None:
        parts.append(_decision(decision))
    if step is not None and step.changed:
        parts.append(f"<h3>Best candidate changed</h3>{diff_html(step.diff)}")
    elif step is not None and rnd.number > 0:
        parts.append('<p class="muted">The best candidate did not change in this round.</p>')
    return "\n".join(parts)


def _candidate(c: Candidate, round_: int, *, is_best: bool) -> str:
    d = c.draft
    title = [f"<b>sample {esc(c.sample)}</b>"]
    if c.stage:
        title.append(f"stage <b>{esc(c.stage)}</b>")
    if c.verification is not None:
        title.append(f"score {score(c.score)} {verdict(c.passed)}")
        if c.verification.get("answer") is not None:
            title.append(f"answer <code>{esc(c.verification['answer'])}</code>")
    for key, label, width in (("model", "model", 60), ("node_id", "node", 12)):  # a node id is 56 hex digits
        if d.get(key):
            title.append(f'<span class="muted">{label} {esc(str(d[key])[:width])}</span>')
    if is_best:
        title.append("<b>best so far</b>")
    anchor = f"r{round_}s{c.sample}" + (f"-{c.stage}" if c.stage else "")  # stages share a sample
    parts = [f'<div class="card{" best" if is_best else ""}" id="{esc(anchor)}">', " · ".join(title)]
    parts.append(f"<pre>{esc(c.text)}</pre>")
    if extra(d):
        parts.append(f"<details><summary>other draft fields</summary>{generic(extra(d))}</details>")
    if c.verification is not None:
        checks = c.verification.get("checks") or []
        if checks:
            rows = [
                [esc(ch.get("name")), verdict(ch.get("passed")), score(ch.get("score")), generic(ch.get("detail", ""))]
                for ch in checks
                if isinstance(ch, dict)
            ]
            parts.append(table(["check", "", "score", "detail"], rows, numeric=[2]))
        questions = [q for q in c.verification.get("questions") or [] if isinstance(q, dict)]
        if questions:
            rows = [[esc(q.get("question", "")), esc(q.get("answer", ""))] for q in questions]
            parts.append("<h3>Verification questions</h3>" + table(["question", "independent answer"], rows))
        if extra(c.verification):
            parts.append(
                f"<details open><summary>verification fields</summary>{generic(extra(c.verification))}</details>"
            )
    for critique in c.critiques:
        parts.append(_critique(critique))
    parts.extend(_other(f, ("task_id", "round", "sample")) for f in c.others)
    parts.append("</div>")
    return "\n".join(parts)


def _critique(critique: Frame) -> str:
    who = ", ".join(str(critique[k]) for k in ("stance", "model") if critique.get(k))
    model = f' <span class="muted">({esc(who)})</span>' if who else ""
    issues = [i for i in critique.get("issues") or [] if isinstance(i, dict)]
    out = [f"<h3>Critique{model}: {len(issues)} issue{'s' if len(issues) != 1 else ''}</h3>"]
    if critique.get("error"):
        out.append(f'<p class="fail">critic reply unusable: {esc(critique["error"])}</p>')
    if issues:
        rows = [
            [
                f'<span class="sev-{esc(i.get("severity"))}">{esc(i.get("severity"))}</span>',
                esc(i.get("quote", "")),
                esc(i.get("reason", "")),
                esc(i.get("fix", "")),
            ]
            for i in issues
        ]
        out.append(table(["severity", "quote", "reason", "fix"], rows))
    if extra(critique):
        out.append(generic(extra(critique)))
    return "\n".join(out)


def _decision(decision: Frame) -> str:
    action, reason = decision.get("action"), decision.get("reason")
    cls = "error" if reason == "error" else "stop" if action == "stop" else ""
    text = f"<b>Decision: {esc(action)}</b>" + (f" ({esc(reason)})" if reason else "")
    text += (
        f" · best so far: round {esc(decision.get('best_round'))}, sample {esc(decision.get('best_sample'))}, "
        f"score {score(decision.get('best_score'))} · this round's best {score(decision.get('round_best_score'))}"
    )
    if decision.get("rolled_back"):
        text += " · <b>rolled back</b> (this round scored worse; the earlier best was kept)"
    if decision.get("detail"):
        text += f"<br>{esc(decision['detail'])}"
    if extra(decision):
        text += generic(extra(decision))
    return f'<div class="decision {cls}">{text}</div>'


def _other(frame: Frame, placed: tuple[str, ...] = ("task_id",)) -> str:
    fields = frame_fields(frame, placed)
    return f'<div class="card"><b>{esc(frame.get("kind", "?"))}</b>{generic(fields)}</div>'
