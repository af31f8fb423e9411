"""A candidate's prompts: its sections over the built-in ones, and the prompts file that carries them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

from redraft.engine.prompts import Prompts, built_in

Entries = dict[str, tuple[int, str]]
"""The sections that differ from the built-in ones, by name: (version, text)."""


def entries_of(prompts: Prompts) -> Entries:
    """The sections of ``prompts`` that differ from the built-in ones."""
    base = built_in().templates
    return {name: (t.version, t.text.template) for name, t in sorted(prompts.templates.items()) if t != base[name]}


def text_of(entries: Entries, section: str) -> tuple[int, str]:
    """A section's version and text: the entry's, or the built-in one's."""
    if section in entries:
        return entries[section]
    template = built_in().templates[section]
    return template.version, template.text.template


def prompts_file(entries: Entries, about: dict[str, Any], path: Path) -> Path:
    """A prompts file of ``entries`` with its ``[about]`` table (`redraft.engine.prompt_files`), written whole."""
    data: dict[str, Any] = {"about": about} if about else {}
    data.update({name: {"version": version, "text": text} for name, (version, text) in sorted(entries.items())})
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_text(tomli_w.dumps(data, multiline_strings=True), encoding="utf-8")
    part.replace(path)
    return path
