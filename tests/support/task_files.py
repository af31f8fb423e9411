"""The task file of the task-file tests: one task per way its check can end.

`CHECK` names `tests.support.check_modules.by_reference`, which finds a task right or wrong, raises
for a task without an answer in its reference, and breaks its contract when the reference asks
(``"misbehave"``).
"""

from __future__ import annotations

import json
from pathlib import Path

# Imported by name in the verifier actors, whose workers start in the repository root (the session
# cluster's directory): a dotted path from there, as a user names a module beside their task file.
CHECK = "tests.support.check_modules:by_reference"


def write_lines(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


GOOD = [
    {"id": "right", "prompt": "What is 3 + 4?", "reference": {"answer": "7"}},
    {"id": "wrong", "prompt": "What is 4 + 4?", "reference": {"answer": "8"}},
    {"id": "raises", "prompt": "What is 5 + 2?"},
    {"id": "wrong-type", "prompt": "What is 6 + 1?", "reference": {"answer": "7", "misbehave": "wrong_type"}},
    {"id": "out-of-range", "prompt": "What is 1 + 6?", "reference": {"answer": "7", "misbehave": "out_of_range"}},
]
