"""Whether a candidate runs inside the allow-list view of the filesystem here, and the user's way out.

Invariant: the launcher runs a candidate only inside the view (``view.py``: the standard library, its
work directory and inputs, a few devices; nothing else of the host), unless the user named the weaker
mode: ``REDRAFT_SANDBOX=weak`` in the environment of the process that runs the sandbox (on a cluster,
every node's). The view needs a mount namespace: root has one, other users need unprivileged user
namespaces, which some kernels and containers refuse. `view_problem` says, once per process, why the
view cannot be built here, so a run that would execute candidates is refused in one line before it
starts rather than task by task.
"""

from __future__ import annotations

import functools
import os

from redraft.errors import SandboxError

WEAK_ENV = "REDRAFT_SANDBOX"
"""The environment variable whose value ``weak`` lets candidates run without the view."""


def weak_allowed() -> bool:
    """Whether the user opted into the weaker sandbox (no view) by name."""
    return os.environ.get(WEAK_ENV, "").strip().lower() == "weak"


@functools.cache
def view_problem() -> str | None:
    """None when a candidate gets the view on this machine (or the user opted out of it); else why not.

    Asked by starting one sandbox that runs nothing (about half a second), once per process.
    """
    if weak_allowed():
        return None
    from redraft.sandbox._limits import SandboxLimits
    from redraft.sandbox._supervisor import run_python

    try:
        run_python("pass", limits=SandboxLimits(timeout_s=60.0))
    except SandboxError as exc:
        return str(exc)
    return None


def refusal(scenario: str) -> str:
    """The one line that refuses to run ``scenario``'s candidates here (see `view_problem`)."""
    return (
        f"scenario {scenario!r} runs candidate code, and this machine's sandbox cannot hide its files from it "
        f"({view_problem()}): a copy of the held-out grade's data anywhere on the machine would be in its reach. "
        "Run as root or where unprivileged user namespaces are allowed, or set "
        f"{WEAK_ENV}=weak to accept the weaker sandbox"
    )
