"""The command refusing bad input: exit code 2 and one readable line on stderr, before anything starts.

`GOOD` is a good task-file line (``GOOD % n`` gives task ``good-n``) for a bad one to sit between;
`SCRIPTED` the flags of the scripted model, so a run that got past validation would need no real one.
"""

from __future__ import annotations

import pytest

from redraft.cli import main

GOOD = '{"id": "good-%d", "prompt": "Mia has 3 apples and gets 4 more. How many now?", "reference": {"answer": 7}}'
SCRIPTED = ["--model", "scripted:tests.support.replies:always_seven"]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the command; assert exit code 2 and one line on stderr; return that line."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert exit_info.value.code == 2, err
    assert len(lines) == 1 and lines[0].startswith("redraft: error: "), err
    assert len(lines[0]) < 400, lines[0][:400]  # one readable line, never the input echoed whole
    return lines[0]
