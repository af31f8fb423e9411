"""The scripted model and check that the tests of redraft serve name by module path, and the app they run on a
real socket (`redraft.serving.serving`: uvicorn on 127.0.0.1 in a thread of this process).

The scripted model answers a draft with "Attempt R: 41" until the request's revision round reaches 2, then with
"Attempt R: 42" (R the round); a critique is one critical issue. The check `says_42` passes an answer holding
42, so a request checked by it takes rounds 0, 1 and 2 and passes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from redraft.backends.base import ChatRequest
from redraft.serving import ServeSettings, Serving, serving
from tests.support.replies import CRITIQUE, is_critique, round_of

SCRIPTED = "scripted:tests.support.serving:learner"
CHECK = "tests.support.serving:says_42"
WHEREABOUTS = "scripted:tests.support.serving:whereabouts"


def learner(request: ChatRequest) -> str:
    if is_critique(request):
        return json.dumps(CRITIQUE)
    r = round_of(request)
    return f"Attempt {r}: {42 if r >= 2 else 41}"


def whereabouts(request: ChatRequest) -> str:
    """Says where the call was made: a named actor's name (a Serve replica's), else "an unnamed actor" (a role
    actor of a fleet); only called on Ray."""
    import ray

    return ray.get_runtime_context().get_actor_name() or "an unnamed actor"


def says_42(text: str, data: dict[str, Any], prompt: str) -> tuple[bool, str]:
    """Passes an answer that holds 42 (or ``data["expected"]``); it is handed the request's messages as its
    prompt, and refuses to judge without them."""
    if not prompt:
        raise ValueError("the check was not given the request's prompt")
    expected = str(data.get("expected", 42))
    return expected in text, f"the answer is not {expected}"


@contextlib.contextmanager
def served(settings: ServeSettings, **drain: Any) -> Iterator[Serving]:
    """``settings`` served on a free port of 127.0.0.1 until the block ends (``port`` forced to 0)."""
    import msgspec

    with serving(msgspec.structs.replace(settings, port=0), drain_s=drain.get("timeout_graceful_shutdown")) as app:
        yield app
