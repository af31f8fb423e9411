"""The documentation read as a test reads it: its pages, their fenced blocks, their links and headings.

The pages are README.md and docs/**/*.md. A fenced block names its language, and an HTML comment on
the line right above it may say more about it:

- ``<!-- file: NAME -->``: the block is the file NAME, which other examples use (a test writes it);
- ``<!-- writes: NAME -->``: the ``python`` block writes the file NAME, which other examples use (a test runs it
  in the examples' workspace first);
- ``<!-- not run: WHY -->``: the block's commands are parsed, not run (the output of a long run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from markdown.extensions.toc import slugify

from tests.support.paths import DOCS, REPO_ROOT

LANGUAGES = frozenset({"python", "bash", "console", "json", "csv", "toml", "yaml", "text"})
_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_MARK = re.compile(r"^<!--\s*(file|writes|not run):\s*(.+?)\s*-->$")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_DIRECTIVE = re.compile(r"^:::\s+(\S+)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def pages() -> list[Path]:
    """Every page a reader may open: the README and the site's Markdown files."""
    return [REPO_ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def shown(page: Path) -> str:
    """A page's path as the repository names it (a page elsewhere, by its whole path)."""
    return str(page.relative_to(REPO_ROOT)) if page.is_relative_to(REPO_ROOT) else str(page)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    """The line of its opening fence, from 1."""
    language: str
    text: str
    file: str | None = None
    writes: str | None = None
    not_run: str | None = None

    @property
    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, in order, with what the comment above each says."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, language = opening[1], opening[2].strip()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith(fence) and not lines[j].strip(fence))
        marks = dict(_MARK.findall(lines[i - 1].strip())) if i > 0 else {}
        text = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(
            Block(
                page,
                i + 1,
                language,
                text,
                file=marks.get("file"),
                writes=marks.get("writes"),
                not_run=marks.get("not run"),
            )
        )
        i = end + 1
    return found


def prose(page: Path) -> list[str]:
    """The page's lines outside fenced blocks, with the code spans inside them kept."""
    kept, fence = [], None
    for line in page.read_text(encoding="utf-8").splitlines():
        opening = _FENCE.match(line)
        if fence is None and opening is not None:
            fence = opening[1]
        elif fence is not None and line.startswith(fence) and not line.strip(fence):
            fence = None
        elif fence is None:
            kept.append(line)
    return kept


def code_spans(page: Path) -> list[str]:
    """The text of every inline code span of the page's prose."""
    return [span for line in prose(page) for _, span in _CODE_SPAN.findall(line)]


def anchors(page: Path) -> set[str]:
    """The anchors a link may name on ``page``: its headings' ids, and the objects its ``::: name``
    directives document (the generated API reference gives each its dotted name as id)."""
    found = set()
    for line in prose(page):
        if heading := _HEADING.match(line):
            found.add(slugify(re.sub(r"[`*]", "", heading[2]), "-"))
        elif directive := _DIRECTIVE.match(line):
            found.add(directive[1])
    return found


def dead_links(page: Path) -> list[str]:
    """Each link or image of the page's prose that points to no file, or to no heading of its page."""
    dead = []
    for line in prose(page):
        for target in _LINK.findall(_CODE_SPAN.sub("", line)):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:: not ours to check offline
                continue
            path, _, anchor = target.partition("#")
            landing = (page.parent / path).resolve() if path else page
            if not landing.exists():
                dead.append(f"{shown(page)}: {target} points to nothing")
            elif anchor and landing.suffix == ".md" and anchor not in anchors(landing):
                dead.append(f"{shown(page)}: {target} names no heading of {landing.name}")
    return dead
