"""The one Jinja2 environment of the HTML views: templates in ``redraft/views/templates``, autoescaped.

Every value a template prints is escaped unless it is `markupsafe.Markup`, and
nothing in redraft makes Markup of run data: model text, task ids, check details,
critiques and unknown fields reach a page only through ``{{ }}``, so none of them
can open a tag. The filters below return plain text (escaped on output); the
HTML structure is in the templates alone. Undefined names are errors
(`StrictUndefined`), so a misspelt field fails a test instead of printing nothing.

A report renders a page per task, so the environment is tuned for that: templates
are looked up once, their compiled code is cached between runs, the shared macros
(``macros.html.j2``) are one global ``m`` rather than an import per page, and the
task page is one template of loops rather than macros (see its header).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import jinja2

from redraft.protocols.messages import Attempt, Decision, Result, Revision
from redraft.views import _fields as fields

TEMPLATES = "templates"


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("redraft.views", TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,  # templates are package data: no stat of every file on every render
        bytecode_cache=_bytecode_cache(),
    )
    env.filters.update(
        score=score,
        usage_line=fields.usage_line,
        generic_events=generic_events,
        revision_lines=revision_lines,
        result_rows=result_rows,
        critic=lambda c: ", ".join(who for who in (c.stance, c.model) if who),
        decision_line=decision_line,
        diff_class=diff_class,
        anchor=lambda c, number: f"r{number}s{c.sample}" + (f"-{c.stage}" if c.stage else ""),  # stages share a sample
        b64=lambda data: base64.b64encode(data).decode(),
        thousands=lambda n: f"{n:,}",
        verdict=lambda passed: "unchecked" if passed is None else "pass" if passed else "fail",
        verdict_class=lambda passed: "muted" if passed is None else "pass" if passed else "fail",
    )
    env.tests.update(
        plain=_plain,
    )
    env.globals.update(
        extra=fields.extra,
        frame_fields=fields.frame_fields,
        request_news=fields.request_news,
        revision_of=fields.revision_of,
        task_lead=fields.task_lead,
    )
    # The shared macros, as the global `m` of every template: made once, where an import would
    # make them again for each task page.
    env.globals["m"] = env.get_template("macros.html.j2").module
    return env


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Jinja's own cache of compiled templates (a private directory under the system's temporary one).

    Compiling the templates costs more than rendering a hundred task pages; a cache
    keyed by each template's source makes every report after the first skip it.
    None where no private directory can be made: templates are then compiled each time.
    """
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):
        return None


@cache
def template(name: str) -> jinja2.Template:
    """A template by file name, loaded once (a page is rendered per task: no lookup per page)."""
    return environment().get_template(name)


def render(name: str, **context: Any) -> str:
    return template(name).render(**context)


def _plain(value: Any) -> bool:
    """A value printed as it is: a number, None, or short text."""
    return value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and not _long(value))


def _long(text: str) -> bool:
    """Text shown as a ``<pre>`` block: several lines, or more than a table cell holds."""
    return "\n" in text or len(text) > 120


def result_rows(r: Result) -> list[tuple[str, str]]:
    """The plain rows of a task's result table after its lead and the loop's verdict (answer, rounds, stop, usage,
    time)."""
    stop = r.stop_reason + (f" ({r.stop_limit})" if r.stop_limit else "")
    usage = fields.usage_line(r.usage) or ""
    return [
        ("answer", str(r.answer)),
        ("rounds", str(r.rounds)),
        ("stop reason", stop),
        ("usage", usage),
        ("wall time", f"{r.wall_s:.2f} s"),
    ]


def decision_line(d: Decision) -> str:
    """What a decision says after its action: why, the best so far, this round's best."""
    reason = f" ({d.reason}{': ' + d.limit if d.limit else ''})" if d.reason else ""
    return (
        f"{reason} · best so far: round {d.best_round}, sample {d.best_sample}, score {score(d.best_score)}"
        f" · this round's best {score(d.round_best_score)}"
    )


def revision_lines(revision: Revision) -> list[tuple[str, list[str]]]:
    """The feedback of a revision as labelled lists of plain lines (the best so far is shown apart)."""
    sections = [
        ("failed checks", [f"{c.name}: {c.detail}" for c in revision.failed_checks]),
        ("critics' issues", [f"{i.severity}: {i.quote!r} is wrong: {i.reason} Fix: {i.fix}" for i in revision.issues]),
        ("verification questions", [f"{q.question} → {q.answer}" for q in revision.questions]),
        ("memory", [_attempt_line(a) for a in revision.memory]),
    ]
    return [(label, lines) for label, lines in sections if lines]


def _attempt_line(a: Attempt) -> str:
    answer = a.answer if a.answer is not None else "(none)"
    reflection = f" Reflection: {a.reflection}" if a.reflection else ""
    return f"round {a.round}: answer {answer}, score {score(a.score)}: {a.summary}{reflection}"


def score(value: Any) -> str:
    """A score with three decimals; anything else as it is."""
    return f"{value:.3f}" if isinstance(value, int | float) else str(value)


def generic_events(value: Any) -> Iterator[tuple[str, Any]]:
    """Any decoded value as a flat stream of (event, text) for the ``generic`` macro to turn into HTML.

    Maps become key/value tables (``map``, a ``row`` per plain value, ``key`` and
    ``end_key`` around any other, ``end_map``), lists of maps or lists one ``item`` each, lists of plain
    values one line, usages one line, long text a ``pre`` block, bytes their size.
    """
    if isinstance(value, dict):
        if not value:
            yield "muted", "{}"
        elif (line := fields.usage_line(value)) is not None:
            yield "text", line
        else:
            yield "map", None
            for key, item in value.items():
                if _plain(item):
                    yield "row", (key, item)
                else:
                    yield "key", key
                    yield from generic_events(item)
                    yield "end_key", None
            yield "end_map", None
    elif isinstance(value, list):
        if not value:
            yield "muted", "[]"
        elif all(not isinstance(v, dict | list) for v in value):
            yield "text", ", ".join(v if isinstance(v, str) else json.dumps(v) for v in value)
        else:
            for item in value:
                yield "item", None
                yield from generic_events(item)
                yield "end_item", None
    elif isinstance(value, bytes):
        yield "muted", f"{len(value)} bytes"
    elif isinstance(value, str) and _long(value):
        yield "pre", value
    else:
        yield "text", value


def diff_class(line: str) -> str:
    """The CSS class of a unified diff line ('' for context lines)."""
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return ""
