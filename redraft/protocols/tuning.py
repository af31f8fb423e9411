"""The messages of ``redraft tune``: what the proposer is asked, and what it answers, as MessagePack frames.

They are a union of their own (`TuneMessage`), apart from a run's trace (`redraft.protocols.messages`):
a run never carries them, and a tune's journal never carries a run's frames.

Invariant, by construction: a `ProposeRequest` holds what the loop saw on *train* tasks (their prompts,
the answers, the feedback checks that failed, the critics' issues, feedback scores) and the section's
own history. It has no field for a grade, a gold value or a task of another split; `redraft.tuning`
builds it from a train evaluation's feedback frames only (`redraft.tuning._examples`). The one judgement
beyond the loop's it may hold is a person's label of a train task's earlier answer (`Judged`), given as the
tune's train evidence (``--train-labels``): train is where the proposer learns, and a label is never read
from validation or test.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from redraft.errors import ProtocolError
from redraft.protocols._records import Usage
from redraft.protocols.bounds import MAX_FRAME_BYTES, bounded

TUNE_WIRE_VERSION = 1


class _TuneFrame(msgspec.Struct, tag_field="kind", frozen=True, kw_only=True, forbid_unknown_fields=False):
    v: int = TUNE_WIRE_VERSION


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """A feedback check that failed, as the loop saw it."""

    check: str
    detail: str


class Judged(msgspec.Struct, frozen=True, kw_only=True):
    """A person's label of an earlier answer to a train task (``redraft tune --train-labels``)."""

    verdict: Literal["pass", "fail"]
    score: float | None = None
    comment: str = ""
    """What the person wrote of it (cut)."""
    answer: str
    """The answer they judged (cut): an earlier run's, not necessarily the one in `Example.answer`."""


class Example(msgspec.Struct, frozen=True, kw_only=True):
    """One train task as the proposer sees it: the loop's view, never its grade."""

    task_id: str
    prompt: str
    """The task's prompt (cut)."""
    answer: str
    """The loop's final candidate (cut)."""
    feedback: float
    """Its feedback score, in [0, 1]."""
    failures: list[Failure] = []
    issues: list[str] = []
    """What the critics said of it, one line each."""
    judged: Judged | None = None
    """A person's label of an earlier answer to the task, when the tune's train evidence is people's labels."""


class Edit(msgspec.Struct, frozen=True, kw_only=True):
    """One earlier version of the section in the candidate's lineage, with what the loop saw of it."""

    version: int
    text: str
    reason: str
    feedback: float | None
    """Mean feedback score of the candidate that carried it, on the train minibatch it was tried on."""


class ProposeRequest(_TuneFrame, tag="propose_request", frozen=True, kw_only=True):
    """Tuner → proposer: rewrite ``section``, whose text is ``text``."""

    section: str
    text: str
    placeholders: list[str]
    """Every ``$name`` the text must keep (and the only ones it may use)."""
    limit: int
    """The most characters the new text may have."""
    history: list[Edit]
    examples: list[Example]
    feedback: float
    """Mean feedback score of the current prompt over the minibatch the examples come from."""
    seed: int


class Proposal(_TuneFrame, tag="proposal", frozen=True, kw_only=True):
    """Proposer → tuner: the new text and why, or why the reply was refused before it cost an evaluation."""

    section: str
    text: str | None
    """None when refused."""
    reason: str
    refused: str | None = None
    """``unreadable``, ``placeholders``, ``too_long``, ``unchanged`` or ``invalid``; None when the edit stands."""
    detail: str = ""
    """What was wrong, in words, when refused."""
    usage: Usage = Usage()
    model: str = ""
    finish_reason: str = ""
    """Why the proposer's reply ended (``length``: cut at its max tokens)."""


TuneMessage = ProposeRequest | Proposal

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[TuneMessage] = msgspec.msgpack.Decoder(TuneMessage)


def encode_tune(message: TuneMessage) -> bytes:
    """The MessagePack frame of a tune message."""
    try:
        return _encoder.encode(message)
    except (UnicodeEncodeError, OverflowError, TypeError, ValueError) as exc:
        raise ProtocolError(f"cannot encode a tune message: {exc}") from None


def decode_tune(data: bytes) -> TuneMessage:
    """One tune frame, validated; `ProtocolError` naming what is wrong."""
    try:
        return bounded(_decoder.decode, data, what="a tune frame", max_bytes=MAX_FRAME_BYTES, json=False)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid tune message: {exc}") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"corrupt tune message: {exc}") from None
