"""What ends a round's exchange with a role: a failed call, or a draft with no text (a failed call too).

A task's loop keeps what every call it made cost, whatever ends it: a draft with no text is a paid call whose
reply is unusable, so its cost is counted before it is dropped as a failure (`empty_draft`), and a task that ends
on it keeps that cost in its usage.
"""

from __future__ import annotations

from collections.abc import Sequence

from redraft.engine.pools import Outcome
from redraft.errors import AuthenticationError, ModelError, machinery_failure
from redraft.protocols.messages import Draft, RoleName


def empty_draft(outcome: Outcome | None) -> ModelError | None:
    """The failure a draft with no text is: nothing to verify or revise, so the model failed, the candidate is not
    merely wrong. The sample is dropped like a failed call (a round left with no sample ends the task), its cost
    counted first."""
    if not isinstance(outcome, Draft) or outcome.text.strip():
        return None
    return ModelError(f"{outcome.model} returned an empty draft (finish reason {outcome.finish_reason!r})")


def raise_failures(outcomes: Sequence[Outcome | None], role: RoleName, *, partial_ok: bool) -> None:
    """Raise what ends the round: refused credentials, the machinery's failure (the task is then redone whole,
    so it ends as an undisturbed one would: such a sample is never merely dropped), or failures where none may
    be dropped (``partial_ok`` False) or none succeeded."""
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    fatal: list[BaseException] = [f for f in failures if isinstance(f, AuthenticationError)]
    fatal += [i for i in (machinery_failure(f, role=role) for f in failures) if i is not None]
    if fatal or (failures and (not partial_ok or len(failures) == len(outcomes))):
        raise (fatal or failures)[0]
