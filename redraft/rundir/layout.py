"""Where things are in a run directory, and how its JSON files are read and written.

```
manifest.json   config, its fingerprint, the directory's own id, the wire version, package versions, start and
                wall time
trace.msgpack   every protocol frame of every finished task, back to back (`redraft.rundir.frames`)
results.jsonl   one JSON object per finished task (`redraft.rundir._results`)
*.damaged       what a resume set aside from the file of that name (`redraft.rundir._recovery`)
batches.jsonl   with ``--batch``: the provider batches sent (`redraft.backends._batch_journal`)
summary.json    the end table's figures (`redraft.rundir.summary.Summary`)
report.html     written by ``redraft report``, with one page per task under report/ (`safe_name`)
secret          random bytes that seed the hidden parts of generated tasks (`redraft.rundir.secret`); a
                comparison's or a tune's directory keeps the one its runs share
ray.log         Ray's own messages, when the run started Ray (its warnings, what it relays from the cluster)
writer.lock     while a writer holds the directory: who it is (`redraft.rundir.lock`)
live.json       while a run goes: its tasks in flight and the round each is in, calls and tokens so far,
                rewritten every few seconds and removed at its end (`redraft.actors._live`)
labels.jsonl    people's judgements of its answers, appended by anyone, never by the run (`redraft.rundir.labels`)
```

JSON files are replaced atomically (written aside, then renamed), so a reader
never sees half a manifest or half a summary.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

MANIFEST, TRACE, RESULTS, SUMMARY = "manifest.json", "trace.msgpack", "results.jsonl", "summary.json"
REPORT, PAGES_DIR = "report.html", "report"
RAY_LOG = "ray.log"
LIVE = "live.json"
RUN_UID = "run_uid"
"""The manifest's key for the directory's own id, which its result lines and provider batches carry."""


def fingerprint(config: dict[str, Any]) -> str:
    """A stable hash of everything that changes what a task's result would be."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def read_object(path: Path) -> dict[str, Any]:
    """A JSON object file, or an empty dict if it is missing, unreadable or not an object (readers go on)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as indented JSON, atomically."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def trace_size(root: Path) -> int:
    """Bytes in the run's trace (0 if it has none yet)."""
    try:
        return (root / TRACE).stat().st_size
    except FileNotFoundError:
        return 0


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(task_id: str) -> str:
    """A file name (without ``.html``) for a task's page: ids hold ``/`` (``HumanEval/0``) and anything else.

    The hash suffix keeps two ids that clean up alike (``a/b`` and ``a_b``) apart.
    """
    digest = hashlib.blake2b(task_id.encode(), digest_size=4).hexdigest()
    return f"{_UNSAFE.sub('_', task_id).strip('._')[:80]}-{digest}"
