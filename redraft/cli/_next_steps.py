"""What the end of a run says to do next: where its report is, how to read one task, and, when the run used
the embedded model, what that model is and how to plug in a real one."""

from __future__ import annotations

import shlex
from pathlib import Path

EMBEDDED = ("local",)
"""Backend specs of the embedded model (a ``local:FILE.gguf`` is the user's own model)."""


def next_steps(out: Path, models: list[str], *, first_task: str | None = None) -> list[str]:
    """The closing lines of ``redraft run`` for the run directory ``out`` whose roles used ``models``."""
    where = shlex.quote(str(out))
    lines = [
        f"next: redraft report {where}   (then open {out / 'report.html'} in a browser)",
    ]
    if first_task is not None:
        lines.append(f"      redraft trace {where} {shlex.quote(first_task)}   (one task's rounds, with diffs)")
    if any(spec in EMBEDDED for spec in models):
        lines += [
            "note: the embedded model (SmolLM2-135M, 135 million parameters) is for trying redraft out with no key",
            "      and no network; expect low scores from it. For real work, name a model: --model openai:gpt-4o-mini,",
            "      --model anthropic:claude-haiku-4-5, or --model openai-compatible:NAME@http://HOST:PORT/v1",
            "      (a vLLM, llama.cpp or Ollama server).",
        ]
    return lines
