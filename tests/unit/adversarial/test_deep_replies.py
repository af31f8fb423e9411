"""Every decoder is bounded: a reply or frame nested thousands of levels deep, or too large, is that message's
failure with its documented consequence, never a `RecursionError` out of a role.

Each decoder of the issue meets the same reply, 3,000 levels deep (the interpreter's own limit is about
1,000): the critic's (the critique is lost, the task goes on), the chain-of-verification plan's, a plan's and
a plan decision's, the proposer's (an ``unreadable`` edit), a wire frame (a `ProtocolError`), a tune frame, an
OpenAI-compatible server's body (a `ValueError`, read as a malformed reply) and a baseline comparison.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import msgspec
import pytest

from redraft import RunConfig, refine
from redraft.backends._chat_wire import decode_reply
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.comparison._result import read_json
from redraft.engine._answers import parse_plan, parse_report
from redraft.engine.proposer import read_edit
from redraft.errors import ProtocolError, UserError
from redraft.protocols.bounds import MAX_DEPTH, TooComplex, bounded, json_too_deep
from redraft.protocols.messages import Critique, Task, decode
from redraft.protocols.tuning import decode_tune
from redraft.strategies._plan_state import read_decision, read_plan

DEEP = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"issues": ' + DEEP + "}"


def test_json_depth_is_counted_outside_strings_and_refused_past_the_limit() -> None:
    assert not json_too_deep("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert json_too_deep("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert not json_too_deep(json.dumps({"text": "[" * 5000, "escaped": '\\"[[[[' * 100}))  # brackets in strings
    assert json_too_deep(b'{"a": "\\\\", "b": ' + b"[" * 100 + b"]" * 100 + b"}")  # an escaped backslash ends no string
    with pytest.raises(TooComplex, match="a reply is 11 long, over the limit of 10"):
        bounded(json.loads, "[1,2,3,4,5]", what="a reply", max_bytes=10)
    # msgpack: the interpreter's own limit, caught
    with pytest.raises(TooComplex, match="nested deeper than the decoder"):
        bounded(msgspec.msgpack.decode, b"\x91" * 3000 + b"\x01", what="a frame", json=False)


def test_a_critique_nested_3000_deep_costs_that_critique_only() -> None:
    def model(request: ChatRequest) -> str:
        return DEEP_OBJECT if request.json_schema is not None else "Answer: 12"

    task = Task(task_id="deep", scenario="arithmetic", prompt="What is 7 plus 6?", gold={"answer": 13})
    config = RunConfig.build(strategy="adversarial", samples=1, max_rounds=2, patience=5)
    spec = ScriptedSpec(script=model)
    refinement = refine(task, config, backends={"drafter": spec, "critic": spec})
    assert refinement.result.error is None and refinement.result.rounds == 2
    critiques = [m for m in refinement.trace if isinstance(m, Critique)]
    assert critiques and all(c.error and "deeper than 64 levels" in c.error for c in critiques)


@pytest.mark.parametrize(
    "parse",
    [parse_report, parse_plan],
    ids=["critique", "verification-questions"],
)
def test_a_model_s_structured_reply_too_deep_is_refused_as_unreadable(parse: object) -> None:
    with pytest.raises(msgspec.DecodeError, match="deeper than 64"):
        parse(DEEP_OBJECT)  # type: ignore[operator]


def test_a_plan_or_decision_too_deep_reads_as_no_plan() -> None:
    assert read_plan('{"steps": ' + DEEP + "}") is None
    assert read_decision('{"action": ' + DEEP + "}") is None


def test_a_proposer_reply_too_deep_or_all_braces_is_an_unreadable_edit() -> None:
    for reply in ('{"text": ' + DEEP + "}", "{" * 200_000):
        proposal = read_edit(reply, "draft_system", "Solve: $task $instructions")
        assert proposal.refused == "unreadable"


def test_a_frame_nested_too_deep_is_a_protocol_error() -> None:
    deep = msgpack.packb({"kind": "task", "v": 1, "task_id": "t", "scenario": "s", "prompt": "p", "gold": {"x": 0}})
    nested = deep.replace(msgpack.packb({"x": 0}), b"\x81\xa1x" * 3000 + b"\x00")
    with pytest.raises(ProtocolError, match="nested deeper"):
        decode(nested)
    with pytest.raises(ProtocolError):  # typed all through: refused at the first level that is not its type
        decode_tune(b"\x91" * 3000 + b"\x01")


def test_a_server_body_nested_too_deep_is_a_malformed_reply() -> None:
    body = json.dumps({"choices": []})[:-1] + ', "x": ' + DEEP + "}"
    with pytest.raises(ValueError, match="deeper than 64"):
        decode_reply(body.encode())


def test_a_baseline_comparison_nested_too_deep_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "comparison.json"
    path.write_text('{"arms": ' + DEEP + "}")
    with pytest.raises(UserError, match=r"is not a comparison\.json: .* nested deeper than 64"):
        read_json(path)
