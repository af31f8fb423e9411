"""The real embedded model (SmolLM2-135M via llama.cpp): grammar-bound critiques, a run on Ray."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, run
from redraft.backends._llama_batch import load
from redraft.backends.base import ChatRequest
from redraft.backends.local import EMBEDDED_MODEL_FILE, SHIPPED_MODEL_FILE, embedded_model_path, shipped_model_path
from redraft.backends.registry import resolve
from redraft.engine._answers import critique_json_schema, parse_report
from redraft.engine.prompts import critique_messages
from redraft.errors import UserError
from redraft.protocols.messages import Critique, Draft, DraftRequest, Task, iter_frames
from redraft.rundir import result_records, trace_bytes

pytestmark = pytest.mark.model

TASK = Task(task_id="t", scenario="arithmetic", prompt="Leo has 14 stickers. Then Leo gets 21 more. How many now?")


def test_grammar_binds_the_critique_to_the_schema() -> None:
    backend = resolve("local").create()

    async def critiques() -> list[str]:
        requests = [
            ChatRequest(
                messages=critique_messages("adversarial", TASK, "14 + 21 = 32\nAnswer: 32").messages,
                max_tokens=512,
                temperature=0.7,
                seed=seed,
                json_schema=critique_json_schema(),
            )
            for seed in range(4)
        ]
        return [(await backend.complete(r)).text for r in requests]

    for text in asyncio.run(critiques()):
        report = parse_report(text)  # raises if the grammar let anything else through
        assert all(issue.severity in ("critical", "major", "minor") for issue in report.issues)


def test_the_grammar_has_the_embedded_judge_grade_every_criterion_once() -> None:
    """Under the incident rubric (three criteria, a long prompt), the 135M judge repeated one criterion and left
    another out while the schema only bounded the count; each position now names its own criterion."""
    from redraft.judging import Judge, scenario_rubric
    from redraft.judging.judge import JUDGE_SETTINGS
    from redraft.scenarios import get_scenario

    scenario = get_scenario("incident")
    rubric = scenario_rubric(scenario)
    assert rubric is not None
    judge = Judge(resolve("local"), rubric, dataclasses.replace(JUDGE_SETTINGS, cache=False))
    task = next(iter(scenario.tasks(seed=0)))

    async def judged() -> list[Any]:
        return [await judge.grade(task, "Summary: the api-gateway failed.", seed=seed) for seed in range(2)]

    for judgment in asyncio.run(judged()):
        assert judgment.error is None, judgment.error  # reasons are bounded: the reply fits its 800 tokens
        assert [c.criterion for c in judgment.criteria] == [c.name for c in rubric.criteria]


def test_local_spec_rejects_missing_or_non_gguf_files(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        resolve(f"local:{tmp_path / 'missing.gguf'}")
    (tmp_path / "model.bin").write_bytes(b"x")
    with pytest.raises(UserError, match=r"\.gguf"):
        resolve(f"local:{tmp_path / 'model.bin'}")


def model_description(path: Path) -> str:
    """llama.cpp's own description of a GGUF file once loaded, e.g. ``llama ?B Q8_0``."""
    import ctypes

    import llama_cpp

    model, _ = load(str(path), parallel=1, ctx_per_seq=64, threads=1)
    text = ctypes.create_string_buffer(128)
    llama_cpp.llama_model_desc(model.model, text, len(text))
    return text.value.decode()


def test_the_embedded_model_runs_as_a_q8_0_copy_made_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDRAFT_CACHE_DIR", str(tmp_path))
    made: list[Path] = []
    racers = [threading.Thread(target=lambda: made.append(embedded_model_path())) for _ in range(3)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    [path] = set(made)  # racing makers each leave a whole file under the one name
    assert path.name == EMBEDDED_MODEL_FILE and path.is_relative_to(tmp_path / "models")
    assert os.listdir(path.parent) == [EMBEDDED_MODEL_FILE]  # no partial file left behind
    assert model_description(path).endswith("Q8_0")
    assert model_description(shipped_model_path()).endswith("Q4_1")
    made_at = path.stat().st_mtime_ns
    assert embedded_model_path() == path and path.stat().st_mtime_ns == made_at  # made once, then found


def sequence_state_bytes(keys: int | None) -> int:
    """Bytes of llama.cpp's saved state for one sequence after a 200-token prompt, with keys of type ``keys``
    (None: what the host uses)."""
    import llama_cpp

    model, context = load(str(embedded_model_path()), parallel=1, ctx_per_seq=256, threads=1, keys=keys)
    tokens = (llama_cpp.llama_token * 200)(*model.tokenize(b"one two three " * 100, add_bos=False, special=False)[:200])
    assert llama_cpp.llama_decode(context.ctx, llama_cpp.llama_batch_get_one(tokens, 200)) == 0
    return int(llama_cpp.llama_state_seq_get_size(context.ctx, 0))


def test_the_host_keeps_attention_keys_as_q8_0() -> None:
    """A Q8_0 key is 34 bytes per 32 numbers against F16's 64: the cache the host fills is that much smaller.
    (That both of the host's paths use these keys, the batched path reproducing the sequential one holds.)"""
    import llama_cpp

    host, f16 = sequence_state_bytes(None), sequence_state_bytes(llama_cpp.GGML_TYPE_F16)
    # Half of the F16 state is keys, half values; the values stay F16.
    assert host == pytest.approx(f16 / 2 + f16 / 2 * 34 / 64, rel=0.01)


def test_an_unwritable_cache_dir_runs_the_model_as_shipped_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"")
    monkeypatch.setenv("REDRAFT_CACHE_DIR", str(blocker))
    with caplog.at_level(logging.WARNING, logger="redraft.backends.local"):
        assert embedded_model_path() == shipped_model_path()
    assert shipped_model_path().name == SHIPPED_MODEL_FILE
    assert "as shipped" in caplog.text and "Q8_0" in caplog.text


def model_hosts() -> dict[str, str]:
    """Every model host actor the cluster has had, alive or dead: its node, by actor id."""
    from ray._private.state import actors

    table: dict[str, dict[str, Any]] = actors()
    return {
        actor: info["Address"]["NodeID"] for actor, info in table.items() if info["ActorClassName"] == "LocalModelHost"
    }


@pytest.mark.ray
def test_refines_arithmetic_on_ray_with_one_model_host_per_node(
    ray_cluster: Any, node_ids: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    hosts_before = model_hosts()
    outcome = run(RunConfig.build(limit=3, samples=2, max_rounds=2, out=str(out), max_tokens=64))
    records = result_records(out)
    assert len(records) == 3 and outcome.summary.tasks == 3
    for record in records:
        assert record["stop_reason"] in ("threshold", "max_rounds", "stable", "no_improvement")
        assert record["error"] is None
        assert record["usage"]["calls"] >= 2 and record["usage"]["output_tokens"] > 0
    trace = list(iter_frames(trace_bytes(out)))
    drafts = [m for m in trace if isinstance(m, Draft)]
    assert {d.model for d in drafts} == {EMBEDDED_MODEL_FILE}  # a base name, never a machine path
    assert {d.node_id for d in drafts} == set(node_ids)
    critiques = [m for m in trace if isinstance(m, Critique)]
    assert all(c.error is None for c in critiques), [c.error for c in critiques]
    # The weights are loaded once per node, shared by the roles. Read from the control store's actor
    # table, which keeps the hosts the run's shutdown is already tearing down.
    hosts = {actor: node for actor, node in model_hosts().items() if actor not in hosts_before}
    assert sorted(hosts.values()) == node_ids
    assert "/" not in (out / "manifest.json").read_text().split('"versions"')[0].replace('"/', "")


@pytest.mark.ray
def test_adaptive_spends_the_batch_budget_with_the_embedded_model(ray_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "adaptive"
    config = RunConfig.build(
        strategy="adaptive", limit=3, samples=2, calls_per_task=3, max_rounds=4, out=str(out), max_tokens=64
    )
    outcome = run(config)
    records = result_records(out)
    assert len(records) == 3 and outcome.summary.tasks == 3 and all(r["error"] is None for r in records)
    assert sum(r["usage"]["calls"] for r in records) <= 3 * 3  # the batch's budget, critiques included
    trace = list(iter_frames(trace_bytes(out)))
    requests = [m for m in trace if isinstance(m, DraftRequest)]
    assert requests and all(m.intent is not None for m in requests)
    assert {m.intent.state for m in requests if m.round == 0 and m.intent} == {"first"}


def test_plan_execute_with_the_embedded_model_plans_and_decides_in_schema_and_runs_its_steps_for_real(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """End to end in this process: the grammar binds every plan and decision to its schema, whatever a 135M
    model makes of the task, and each step's program (or its lack) is run and observed in the sandbox."""
    import msgspec

    import redraft
    from redraft.engine._answers import DecisionAnswer, PlanAnswer
    from redraft.protocols.messages import PlanVersion, Result, Verification
    from redraft.scenarios import get_scenario
    from redraft.strategies._plan_execute import PlanExecute

    monkeypatch.setattr(PlanExecute, "max_moves", 4)  # a plan, and three more calls: the test's time
    task = next(get_scenario("pipeline").tasks(seed=0))
    config = RunConfig.build(scenario="pipeline", strategy="plan_execute", max_rounds=1, max_tokens=384)
    done = redraft.refine(task, config)
    trace = done.trace
    result = trace[-1]
    assert isinstance(result, Result) and result.stop_reason != "error", result.error
    drafts = [m for m in trace if isinstance(m, Draft)]
    plans = [d for d in drafts if d.stage == "plan"]
    decisions = [d for d in drafts if d.stage and d.stage.startswith("decide")]
    assert plans and all(d.model == EMBEDDED_MODEL_FILE for d in plans)
    for draft in plans:  # raises if the grammar let anything else through (but a reply cut at its max tokens)
        if draft.finish_reason != "length":
            msgspec.json.decode(draft.text, type=PlanAnswer)
    for draft in decisions:
        if draft.finish_reason != "length":
            msgspec.json.decode(draft.text, type=DecisionAnswer)
    assert isinstance(next(m for m in trace if isinstance(m, PlanVersion)), PlanVersion)
    runs = [m for m in trace if isinstance(m, Verification) and m.observation is not None]
    assert runs and all(r.stage and r.stage.startswith("step-") for r in runs)
    assert result.usage.calls == len(drafts) - 1 <= 4  # every model call, and the whole program the steps made


@pytest.mark.ray
def test_tune_with_the_embedded_model_proposes_in_schema_and_reaches_an_honest_verdict(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """End to end on Ray: each evaluation a run of the embedded model, the proposer an actor with the same model
    answering in the edit schema's grammar, its edit checked, the verdict said and the report written."""
    from redraft import TuneSettings, tune
    from redraft.tuning._journal import TuneJournal

    config = RunConfig.build(
        limit=10, strategy="best_of_n", samples=1, max_rounds=1, max_tokens=64, out=str(tmp_path / "tune")
    )
    settings = TuneSettings(sections=["draft_system"], minibatch=2, max_proposals=1, parallel=1, examples=2)
    done = tune(config, settings)
    journal = TuneJournal(done.out)
    [proposed] = journal.proposals.values()
    proposal = proposed.proposal
    assert proposal.model == EMBEDDED_MODEL_FILE and proposal.usage.calls == 1
    assert proposal.refused in (None, "unreadable", "unchanged", "placeholders", "too_long")
    assert proposal.refused != "unreadable" or proposal.finish_reason == "length"  # the grammar binds the rest
    if proposal.refused is None:
        assert proposal.text is not None and "$instructions" in proposal.text
    verdict = done.verdict
    assert verdict is not None and done.json is not None and json.loads(done.json.read_text())["verdict"]["says"]
    if not verdict.test_read:
        assert verdict.says.startswith("no significant improvement") and not (done.out / "tuned-prompts.toml").exists()
    else:
        assert verdict.adopted == (verdict.significant and (verdict.mean or 0) > 0)
