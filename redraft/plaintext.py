"""Text from outside made plain where it enters: every lone surrogate replaced by U+FFFD.

A Python ``str`` may hold a lone surrogate (U+D800..U+DFFF) that UTF-8, and so a frame, a record or a
journal line, cannot carry: a JSON ``"\\ud800"`` escape decodes to one, and so does a file name or an
exception message a candidate wrote. Such a character in a model's reply, a check's detail or a
candidate's exception message once made the frame holding it unencodable, which ended the task or
dropped its grade. `plain_text` is the one rule for it, applied where text enters redraft:

- a model's reply, in the client every role calls its model through (`redraft.backends.cache.cached`);
- what a candidate's program reports back from the sandbox (`redraft.sandbox`'s harness report);
- a check's or a grade's verdict and a scenario's extracted answer, where the verifier and the grader
  receive them (`redraft.engine`), whatever scenario made them (a user's check included);
- an exception's message, where it becomes a task's recorded error (`redraft.errors.describe`).

A misbehaving candidate or model costs a character, never the task. This module is a room of its own
and imports nothing of redraft, so every room that takes text in may use it.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def plain_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD; text that is already UTF-8-encodable is returned as is."""
    return _SURROGATE.sub(REPLACEMENT, text)
