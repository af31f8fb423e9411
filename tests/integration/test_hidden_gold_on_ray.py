"""A pipeline run on Ray against the gold-rebuilding candidate: graded 0 of its tasks, and the secret its directory
keeps is in no other file of the run (trace, results, manifest, summary) nor in any prompt a model was sent."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunConfig, run
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.rundir import trace_bytes
from tests.support.gold_rebuilder import rebuilder_program

pytestmark = pytest.mark.ray

LIMIT = 6


def holds(data: bytes, secret: bytes) -> bool:
    return secret in data or secret.hex().encode() in data or secret.hex().upper().encode() in data


def test_the_gold_rebuilding_candidate_passes_nothing_and_the_secret_is_in_no_frame_or_prompt(
    ray_cluster: Any, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    attack = rebuilder_program(LIMIT)

    def reply(request: ChatRequest) -> str:  # runs in a role actor: every prompt it is sent, kept
        (prompts / f"{uuid.uuid4().hex}.txt").write_text("\n".join(m.content for m in request.messages))
        return attack

    model = ScriptedSpec(script=reply)
    out = tmp_path / "run"
    config = RunConfig.build(
        scenario="pipeline",
        strategy="verifier_only",
        samples=1,
        max_rounds=1,
        limit=LIMIT,
        max_tokens=1024,
        out=str(out),
    )
    summary = run(config, Plugins(backends={"drafter": model, "critic": model})).summary
    assert (summary.tasks, summary.graded, summary.graded_passed) == (LIMIT, LIMIT, 0)
    secret = (out / "secret").read_bytes()
    written = [p for p in out.rglob("*") if p.is_file() and p.name != "secret"]
    assert {p.name for p in written} >= {"trace.msgpack", "results.jsonl", "manifest.json", "summary.json"}
    assert not [p.name for p in written if holds(p.read_bytes(), secret)]
    assert not holds(trace_bytes(out), secret)  # the trace's frames, decompressed
    sent = list(prompts.iterdir())
    assert len(sent) >= LIMIT and not [p.name for p in sent if holds(p.read_bytes(), secret)]
    again = run(
        config, Plugins(backends={"drafter": model, "critic": model})
    )  # a rerun reads the same secret: all done
    assert (again.total, again.skipped) == (LIMIT, LIMIT) and (out / "secret").read_bytes() == secret
