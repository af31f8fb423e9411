"""Build hooks of the documentation site (named in mkdocs.yml), for the generated CLI reference.

- Its generator runs the ``typer`` command by name, and writes an empty page when that command
  fails. The scripts beside the interpreter running the build come first on PATH, so the command
  found is the one installed with this environment's redraft, activated or not.
- Its text arrives as finished HTML inside ``div.typer-docs``. Left as plain strings, the page's own
  inline patterns would parse it again and take ``[OPTIONS] [SCENARIO]`` in a usage line for a
  reference link; marked atomic, it is kept as the generator wrote it.
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as etree
from pathlib import Path
from typing import Any

from markdown import Extension, Markdown
from markdown.treeprocessors import Treeprocessor
from markdown.util import AtomicString


def on_startup(**_: Any) -> None:
    scripts = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([scripts, os.environ.get("PATH", "")])


def on_config(config: Any, **_: Any) -> Any:
    config["markdown_extensions"].append(_KeepGeneratedText())
    return config


class _Atomic(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        for div in root.iter("div"):
            if div.get("class") == "typer-docs":
                for element in div.iter():
                    if element is not div and element.text:
                        element.text = AtomicString(element.text)
                    if element is not div and element.tail:
                        element.tail = AtomicString(element.tail)


class _KeepGeneratedText(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # the name Markdown calls
        md.treeprocessors.register(_Atomic(md), "keep-generated-text", 25)  # before "inline" (20)
