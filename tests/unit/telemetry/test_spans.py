"""A run's spans, sent to a real OTLP/HTTP receiver on 127.0.0.1: the structure, the GenAI attributes, and every
call's tokens and cost equal to the run's results; the rules that make them; the faults, each one line.

The run directory is written in this process by the real arbiter with scripted models named after priced ones,
so the costs are not 0; the live export (``redraft run --otel``) is tested on Ray, over the same contract, in
tests/integration/test_otel_on_ray.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from redraft import Plugins, RunConfig
from redraft.backends.base import ChatRequest
from redraft.backends.pricing import default_prices
from redraft.backends.scripted import ScriptedSpec
from redraft.cli import main
from redraft.cli._export import export_run as export_options
from redraft.engine._refine import local_roles, refine_trace
from redraft.engine.arbiter import Arbiter
from redraft.engine.grader import Grader
from redraft.engine.resolution import Cast, RoleSetup, arbiter_settings
from redraft.errors import UserError
from redraft.protocols.messages import Critique, Decision, Draft, Result, Usage, Verification, decode_as, encode
from redraft.rundir import KnownFrame, RunStore
from redraft.scenarios import get_scenario
from redraft.strategies import get_strategy
from redraft.telemetry import GEN_AI, RunFacts, export_run, task_span, traces_url
from redraft.telemetry._spans import provider_of, requested_model, role_of
from tests.support.otlp_receiver import OTLPReceiver, spans_match_results
from tests.support.paths import REPO_ROOT
from tests.support.replies import CRITIQUE, is_critique, round_of, task_of, worked
from tests.support.resolved import manifest_for

DRAFTER, CRITIC = "gpt-4o-mini-2024-07-18", "claude-haiku-4-5-20251001"
"""What the scripted models report, as the APIs report their models: priced by the built-in table."""


def answers(request: ChatRequest) -> str:
    """One step off in round 0, right once revised: every task has two rounds and round 0 a critique."""
    if is_critique(request):
        return json.dumps(CRITIQUE)
    return worked(task_of(request), off=0 if round_of(request) >= 1 else 1)


def make_run(root: Path, strategy: str = "adversarial", tasks: int = 3) -> Path:
    """A finished run directory of ``tasks`` arithmetic tasks, its config naming OpenAI and Anthropic models."""
    config = RunConfig.build(
        scenario="arithmetic",
        strategy=strategy,
        limit=tasks,
        samples=2,
        drafter="openai:gpt-4o-mini",
        critic="anthropic:claude-haiku-4-5",
        out=str(root),
    )
    store = RunStore.open(root, manifest_for(config, root.name))
    drafter = ScriptedSpec(script=answers, model=DRAFTER, delay_s=0.002)
    setup = RoleSetup(scenario="arithmetic", drafter=drafter, critic=ScriptedSpec(script=answers, model=CRITIC))
    arbiter = Arbiter(local_roles(Cast.of(setup, get_strategy(strategy))), arbiter_settings(config))
    for task in list(get_scenario("arithmetic").tasks(seed=0))[:tasks]:
        trace = asyncio.run(refine_trace(arbiter, Grader("arithmetic"), task))
        store.append([encode(m) for m in trace], decode_as(encode(trace[-1]), Result))
    store.finish(wall_s=2.0)
    return root


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("otel") / "run")


def test_a_runs_spans_are_its_tasks_rounds_and_calls_with_their_tokens_and_costs(run_dir: Path) -> None:
    with OTLPReceiver() as receiver:
        url, sent = export_run(run_dir, receiver.url)
    assert url == f"{receiver.url}/v1/traces" and sent == len(receiver.spans) > 3
    tasks = spans_match_results(receiver, run_dir)
    children = receiver.children()
    calls = [c for t in tasks.values() for r in children[t.span_id] for c in children[r.span_id]]
    drafts = [c for c in calls if c.attributes["redraft.role"] == "drafter"]
    critiques = [c for c in calls if c.attributes["redraft.role"] == "critic"]
    assert drafts and critiques and sum(c.attributes["redraft.cost_usd"] for c in calls) > 0
    assert {(c.name, c.attributes[GEN_AI.PROVIDER_NAME], c.attributes[GEN_AI.RESPONSE_MODEL]) for c in drafts} == {
        ("chat gpt-4o-mini", "openai", DRAFTER)
    }
    assert {(c.name, c.attributes[GEN_AI.PROVIDER_NAME], c.attributes[GEN_AI.RESPONSE_MODEL]) for c in critiques} == {
        ("chat claude-haiku-4-5", "anthropic", CRITIC)
    }
    assert all(c.attributes[GEN_AI.RESPONSE_FINISH_REASONS] == ["stop"] for c in drafts)
    first = drafts[0]
    usage = Usage(
        input_tokens=first.attributes[GEN_AI.USAGE_INPUT_TOKENS],
        output_tokens=first.attributes[GEN_AI.USAGE_OUTPUT_TOKENS],
        calls=1,
    )
    assert first.attributes["redraft.cost_usd"] == pytest.approx(default_prices().cost(DRAFTER, usage))
    assert all(c.attributes["redraft.priced"] for c in calls)
    [run] = receiver.roots()
    assert run.attributes["redraft.strategy"] == "adversarial" and run.attributes["redraft.run.id"] == "run"
    assert all(t.attributes["redraft.passed"] and t.attributes["redraft.graded_pass"] for t in tasks.values())


def test_the_self_critic_is_its_own_role(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "self", strategy="self_refine", tasks=2)
    with OTLPReceiver() as receiver:
        export_run(run_dir, receiver.url)
    spans_match_results(receiver, run_dir)  # its per-role sums hold for self_critic too
    selfish = [s for s in receiver.spans if s.attributes.get("redraft.role") == "self_critic"]
    assert selfish and {s.attributes[GEN_AI.REQUEST_MODEL] for s in selfish} == {"gpt-4o-mini"}  # the drafter's


def test_a_judge_s_calls_are_spans_of_their_own_under_the_task(tmp_path: Path) -> None:
    import json as json_module

    from redraft.judging.grading import JudgeGrader
    from redraft.judging.rubric import rubric_of
    from tests.support import judges

    root, rubric = tmp_path / "judged", tmp_path / "rubric.json"
    rubric.write_text(json_module.dumps(judges.RUBRIC))
    config = RunConfig.build(
        scenario="arithmetic",
        limit=2,
        samples=2,
        drafter="openai:gpt-4o-mini",
        critic="anthropic:claude-haiku-4-5",
        judge="openai:gpt-4o",
        rubric=str(rubric),
        out=str(root),
    )
    store = RunStore.open(root, manifest_for(config, root.name))
    model = ScriptedSpec(script=answers, model=DRAFTER)
    arbiter = Arbiter(
        local_roles(
            Cast.of(RoleSetup(scenario="arithmetic", drafter=model, critic=model), get_strategy("adversarial"))
        ),
        arbiter_settings(config),
    )
    judge = JudgeGrader(ScriptedSpec(script=judges.faithful, model="gpt-4o-2024-08-06"), rubric_of(judges.RUBRIC))
    for task in list(get_scenario("arithmetic").tasks(seed=0))[:2]:
        trace = asyncio.run(refine_trace(arbiter, Grader("arithmetic"), task, judge=judge))
        store.append([encode(m) for m in trace], decode_as(encode(trace[-1]), Result))
    store.finish(wall_s=1.0)
    with OTLPReceiver() as receiver:
        export_run(root, receiver.url)
    spans_match_results(receiver, root)  # the judge's calls and cost are its role's, summing to each task's
    judged = [s for s in receiver.spans if s.attributes.get("redraft.role") == "judge"]
    assert len(judged) == 2 and all(s.attributes["redraft.cost_usd"] > 0 for s in judged)
    assert {(s.name, s.attributes[GEN_AI.PROVIDER_NAME]) for s in judged} == {("chat gpt-4o", "openai")}


def test_the_semantic_conventions_names_are_the_current_ones() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv

    for name in [n for n in vars(GEN_AI) if n.isupper()]:
        assert getattr(GEN_AI, name) == getattr(semconv, f"GEN_AI_{name}"), name
    assert {"openai", "anthropic", "azure.ai.openai"} <= {v.value for v in semconv.GenAiProviderNameValues}
    assert "chat" in {v.value for v in semconv.GenAiOperationNameValues}


@pytest.mark.parametrize(
    ("spec", "provider", "model"),
    [
        ("openai:gpt-4o-mini?rpm=500", "openai", "gpt-4o-mini"),
        ("azure:prod-chat@https://example-resource.openai.azure.com", "azure.ai.openai", "prod-chat"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("openai-compatible:org/model@v2@http://127.0.0.1:8000/v1", "openai-compatible", "org/model@v2"),
        ("local:/models/qwen.Q8_0.gguf", "local", "qwen.Q8_0.gguf"),
        ("local", "local", "answered-by"),
    ],
)
def test_a_spec_names_its_provider_and_requested_model(spec: str, provider: str, model: str) -> None:
    assert (provider_of(spec), requested_model(spec, "answered-by")) == (provider, model)


def test_rounds_share_the_tasks_time_by_their_slowest_draft_and_calls_stay_inside() -> None:
    def draft(round_: int, sample: int, latency: float) -> Draft:
        return Draft(task_id="t", round=round_, sample=sample, text="x", latency_s=latency, usage=Usage(calls=1))

    critique = Critique(task_id="t", round=0, sample=0, usage=Usage(calls=1), stance="self")
    check = Verification(task_id="t", round=1, sample=0, score=1.0, passed=True)  # no model call: no span
    messages = [draft(0, 0, 1.0), draft(0, 1, 3.0), critique, draft(1, 0, 1.0), check]
    decisions = [
        Decision(task_id="t", round=r, action="stop", best_round=0, best_sample=0, best_score=1, round_best_score=1)
        for r in (0, 1)
    ]
    frames = [KnownFrame(m) for m in [*messages, *decisions]]
    result = Result(
        task_id="t",
        scenario="s",
        answer=None,
        text="",
        score=1,
        passed=True,
        initial_score=0,
        initial_passed=False,
        rounds=2,
        stop_reason="threshold",
        usage=Usage(calls=4),
        wall_s=8.0,
    )
    tree = task_span(frames, result, end_s=100.0, facts=RunFacts({}, default_prices()))
    assert (tree.start_s, tree.end_s) == (92.0, 100.0)
    first, second = tree.children
    assert (first.start_s, first.end_s, second.start_s, second.end_s) == (92.0, 98.0, 98.0, 100.0)  # 3 : 1
    assert [(c.start_s, c.end_s) for c in first.children] == [(92.0, 93.0), (92.0, 95.0), (95.0, 98.0)]
    assert [c.attributes["redraft.role"] for c in first.children] == ["drafter", "drafter", "self_critic"]
    assert len(second.children) == 1 and role_of(critique) == "self_critic"


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        (
            "127.0.0.1:4318",
            "the OTLP endpoint must be an http(s) URL such as http://127.0.0.1:4318, got '127.0.0.1:4318'",
        ),
        ("http://user:secret@127.0.0.1:4318", "put the OTLP endpoint's credentials in OTEL_EXPORTER_OTLP_HEADERS"),
    ],
)
def test_a_bad_endpoint_is_one_line(endpoint: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        traces_url(endpoint)
    assert str(caught.value).startswith(message) and "secret" not in str(caught.value)
    assert traces_url("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/traces"
    assert traces_url("https://collector.example/otlp/v1/traces") == "https://collector.example/otlp/v1/traces"


def test_an_endpoint_that_refuses_is_one_line_from_the_command(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with OTLPReceiver() as receiver:
        receiver.fail_status = 400
        with pytest.raises(SystemExit) as exit_info:
            main(["export", str(run_dir), "--format", "otel", "--endpoint", receiver.url])
    assert exit_info.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said == (
        f"redraft: error: the OTLP endpoint {receiver.url}/v1/traces did not take the spans (0 sent before): "
        "is a collector listening there, on OTLP/HTTP?"
    )


def test_the_command_sends_the_spans_and_says_where(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with OTLPReceiver() as receiver:
        main(["export", str(run_dir), "--format", "otel", "--endpoint", receiver.url])
    assert capsys.readouterr().out.strip() == f"{receiver.url}/v1/traces ({len(receiver.spans)} spans)"
    for fmt, table, endpoint, message in [
        ("otel", "results", None, "--format otel sends spans to an OTLP/HTTP endpoint: give it, e.g. --endpoint"),
        ("csv", "results", receiver.url, "--endpoint is where --format otel sends spans"),
        ("otel", "rounds", receiver.url, "--format otel sends every span .* --out and --table are for tables"),
        ("xlsx", "results", None, r"unknown --format 'xlsx' \(known: parquet, csv, otel\)"),
    ]:
        with pytest.raises(UserError, match=f"^{message}"):
            export_options(run_dir, fmt, table, None, endpoint)


def test_without_the_extra_the_export_names_it_in_one_line(run_dir: Path) -> None:
    program = (
        "import sys\nsys.modules['opentelemetry.exporter.otlp.proto.http'] = None\n"
        "from redraft.cli import main\n"
        f"main(['export', {str(run_dir)!r}, '--format', 'otel', '--endpoint', 'http://127.0.0.1:9'])\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "redraft: error: Sending spans to an OTLP endpoint (--otel, --format otel) needs redraft's 'otel' extra: "
        "pip install 'redraft[otel]'"
    ]


def test_a_run_with_a_bad_endpoint_is_refused_before_anything_starts(tmp_path: Path) -> None:
    from redraft import run

    model = ScriptedSpec(script=answers)
    config = RunConfig.build(limit=1, samples=1, out=str(tmp_path / "run"), otel="127.0.0.1:4318")
    with pytest.raises(UserError, match=r"^the OTLP endpoint must be an http\(s\) URL"):
        run(config, Plugins(backends={"drafter": model, "critic": model}))
    assert not (tmp_path / "run").exists()
