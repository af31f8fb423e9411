"""The embedded model's batched path: same text alone or batched, same prompt as llama-cpp-python, limits kept."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import jsonschema
import msgspec
import numpy as np
import pytest

from redraft.backends._llama_batch import BATCH_TOKENS
from redraft.backends._llama_chat import ChatPrompts, grammar_for_schema
from redraft.backends._llama_sampling import SamplerChain
from redraft.backends.base import ChatRequest, Completion
from redraft.backends.local import LocalModelHost, embedded_model_path
from redraft.engine._answers import critique_json_schema, parse_report
from redraft.engine.prompts import critique_messages
from redraft.errors import BackendError
from redraft.protocols.messages import ChatMessage, Task

pytestmark = pytest.mark.model

PARALLEL = 4
CTX_PER_SEQ = 1024


def ask(content: str, *, seed: int | None = 7, max_tokens: int = 24, **extra: Any) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=content)], max_tokens=max_tokens, seed=seed, **extra)


def new_host(parallel: int) -> LocalModelHost:
    return LocalModelHost(str(embedded_model_path()), threads=2, parallel=parallel, ctx_per_seq=CTX_PER_SEQ)


@pytest.fixture(scope="module")
def host() -> Iterator[LocalModelHost]:
    host = new_host(PARALLEL)
    yield host
    host.close()


def run_together(host: LocalModelHost, requests: list[ChatRequest]) -> list[Completion]:
    async def together() -> list[Completion]:
        return list(await asyncio.gather(*(host.complete(r) for r in requests)))

    return asyncio.run(together())


def outcome(completion: Completion) -> tuple[str, str, int, int]:
    return (completion.text, completion.finish_reason, completion.usage.input_tokens, completion.usage.output_tokens)


STICKERS = Task(task_id="t", scenario="arithmetic", prompt="Leo has 14 stickers and gets 21 more. How many now?")


def critique(*, seed: int, temperature: float, max_tokens: int, schema: dict[str, Any] | None = None) -> ChatRequest:
    """An adversarial critique of a wrong answer to STICKERS, bound to ``schema`` (the critique's by default)."""
    return ChatRequest(
        messages=critique_messages("adversarial", STICKERS, "14 + 21 = 32\nAnswer: 32").messages,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        json_schema=schema or critique_json_schema(),
    )


def test_a_request_gives_the_same_text_alone_or_batched(host: LocalModelHost) -> None:
    request = ask("Write a Python function that adds two numbers.", seed=11, temperature=0.9, max_tokens=32)
    [alone] = run_together(host, [request])
    shared_before = host.prompts_shared()
    others = [
        ask("Name three colors.", seed=1, max_tokens=40),
        ask("What is 17 + 25?", seed=2, temperature=0.3),
        msgspec.structs.replace(request, seed=12),  # same prompt, another seed: shares the prompt evaluation
        ask("Tell me a joke about cats.", seed=3, max_tokens=8),
        ask("Say hello.", seed=4),
    ]
    # Twice the same request among others (more than the slots): the second copies the first's prompt.
    batched = run_together(host, [request, *others[:2], request, *others[2:]])
    assert outcome(batched[0]) == outcome(alone)
    assert outcome(batched[3]) == outcome(alone)
    assert host.prompts_shared() > shared_before
    assert alone.usage.output_tokens > 0 and alone.text


def test_a_twin_arriving_while_its_twin_generates_copies_its_prompt_and_gives_the_same_text(
    host: LocalModelHost,
) -> None:
    request = ask("Write a short poem about autumn leaves.", seed=31, temperature=0.9, max_tokens=40)
    [alone] = run_together(host, [request])
    host.close()  # a fresh host: nothing kept from the call above

    async def late_twin() -> tuple[Completion, Completion]:
        first = asyncio.ensure_future(host.complete(request))
        await host.complete(ask("Say yes.", seed=1, max_tokens=1))  # evaluated after the first's prompt
        shared = host.prompts_shared()
        twin = await host.complete(msgspec.structs.replace(request))  # the first still generates
        assert host.prompts_shared() == shared + 1
        return await first, twin

    first, twin = asyncio.run(late_twin())
    assert outcome(first) == outcome(alone)
    assert outcome(twin) == outcome(alone)


def test_a_prompt_kept_from_a_finished_call_is_reused_until_its_slot_is_needed(host: LocalModelHost) -> None:
    request = ask("Describe a red bicycle in one sentence.", seed=21, temperature=0.9, max_tokens=24)
    [first] = run_together(host, [request])
    shared = host.prompts_shared()
    [again] = run_together(host, [request])  # its slot kept the prompt: only the last token is evaluated again
    assert host.prompts_shared() == shared + 1
    assert outcome(again) == outcome(first)
    # PARALLEL other prompts, one after another, take every slot: the oldest kept prompt goes first.
    run_together(host, [ask(f"Name a city in country number {i}.", seed=i, max_tokens=4) for i in range(PARALLEL)])
    shared = host.prompts_shared()
    [evaluated] = run_together(host, [request])
    assert host.prompts_shared() == shared
    assert outcome(evaluated) == outcome(first)


RULES = " ".join(f"Rule {i}: answer rule {i} questions with care and name the rule you used." for i in range(12))


def with_rules(question: str, *, seed: int) -> ChatRequest:
    """A request whose prompt shares a long prefix (the rules) with every other such request."""
    messages = [ChatMessage(role="system", content=RULES), ChatMessage(role="user", content=question)]
    return ChatRequest(messages=messages, max_tokens=24, seed=seed, temperature=0.9)


def fresh_outcome(request: ChatRequest) -> tuple[str, str, int, int]:
    """The request's outcome on a host that holds nothing: its whole prompt evaluated."""
    host = new_host(2)
    try:
        [completion] = run_together(host, [request])
    finally:
        host.close()
    return outcome(completion)


@pytest.mark.parametrize(
    ("parallel", "donor"),
    [(2, "a kept prompt in another slot"), (1, "the slot's own kept prompt"), (2, "a sequence still generating")],
)
def test_a_prompt_sharing_a_prefix_evaluates_only_the_rest_and_gives_the_same_text(parallel: int, donor: str) -> None:
    first = with_rules("Which rule covers colors?", seed=3)
    second = with_rules("Which rule covers numbers, and why?", seed=4)
    expected = fresh_outcome(second)
    host = new_host(parallel)
    try:
        if donor == "a sequence still generating":

            async def while_first_generates() -> Completion:
                running = asyncio.ensure_future(host.complete(msgspec.structs.replace(first, max_tokens=200)))
                await host.complete(ask("Say yes.", seed=1, max_tokens=1))  # the first's prompt is evaluated
                assert not running.done()
                got = await host.complete(second)
                running.cancel()
                return got

            got = asyncio.run(while_first_generates())
        else:
            run_together(host, [first])
            [got] = run_together(host, [second])
        prompt_tokens = got.usage.input_tokens
        assert outcome(got) == expected
        # The rules and the chat template before the question: at least a hundred tokens not evaluated again.
        assert 100 < host.prefix_tokens_reused() < prompt_tokens
    finally:
        host.close()


def test_prompts_arriving_together_with_a_common_prefix_evaluate_it_once() -> None:
    requests = [with_rules(f"Which rule covers question {i}?", seed=40 + i) for i in range(3)]
    expected = [fresh_outcome(r) for r in requests]
    host = new_host(4)
    try:
        run_together(host, [ask("Say yes.", seed=1, max_tokens=1)])
        before = host.prefix_tokens_reused()
        together = run_together(host, requests)
        prefix = host.prefix_tokens_reused() - before
    finally:
        host.close()
    assert [outcome(c) for c in together] == expected
    # The second and third each took the rules from the first's stream, evaluated just before them.
    assert prefix > 2 * 100


def test_short_prompts_arriving_together_give_the_same_text_as_alone() -> None:
    # The mix that once broke it: eight short prompts evaluated in one batch gave the seventh
    # other logits than alone. Prompts are now evaluated one at a time.
    questions = [
        "Write a Python function that adds two numbers.",
        "What is 17 + 25? Explain.",
        "Name three colors and one thing of each color.",
        "Tell me a short joke about cats.",
        "Describe the water cycle in two sentences.",
        "Give me three tips for learning to code.",
        "What is the capital of France, and why is it famous?",
        "Write a haiku about the sea.",
    ]
    requests = [ask(q, seed=1000 + i, temperature=0.7, max_tokens=16) for i, q in enumerate(questions)]
    host = new_host(8)
    try:
        alone = [run_together(host, [r])[0] for r in requests]
        together = run_together(host, requests)
    finally:
        host.close()
    assert [outcome(c) for c in together] == [outcome(c) for c in alone]


def test_the_batched_path_reproduces_the_sequential_path() -> None:
    request = ask("What is the capital of France?", seed=5, temperature=0.8, max_tokens=24)
    sequential = LocalModelHost(str(embedded_model_path()), threads=2, ctx_per_seq=CTX_PER_SEQ, batched=False)
    try:
        [expected] = run_together(sequential, [request])
    finally:
        sequential.close()
    batched = new_host(2)
    try:
        [got] = run_together(batched, [request])
    finally:
        batched.close()
    assert outcome(got) == outcome(expected)


def test_grammar_bound_draws_on_the_shortlist_reproduce_the_whole_vocabulary_match() -> None:
    """The batched host settles most grammar-bound draws on the highest-logit tokens; llama-cpp-python's
    sequential path matches the grammar against the whole vocabulary at every draw. Same text."""
    requests = [
        critique(seed=seed, temperature=temperature, max_tokens=96)
        for temperature, seed in [(0.7, 0), (0.7, 1), (1.2, 2), (0.0, 3)]
    ]
    sequential = LocalModelHost(str(embedded_model_path()), threads=2, ctx_per_seq=CTX_PER_SEQ, batched=False)
    try:
        expected = [run_together(sequential, [request])[0] for request in requests]
    finally:
        sequential.close()
    batched = new_host(PARALLEL)
    try:
        got = run_together(batched, requests)
        assert batched._engine is not None
        shortlisted, full_matches = batched._engine[0].grammar_draws
    finally:
        batched.close()
    assert [outcome(c) for c in got] == [outcome(c) for c in expected]
    tokens = sum(c.usage.output_tokens for c in got)
    assert tokens <= shortlisted + full_matches <= tokens + len(requests)  # and the end-of-text draws
    assert shortlisted > full_matches  # the shortlist is the common case, and it did run


def test_the_token_tree_finds_every_token_the_grammar_allows(
    host: LocalModelHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At every grammar-bound draw of real generations, the tree walk and a match against the whole
    vocabulary allow the same tokens (the prefix closure the walk relies on, checked)."""
    checked: list[bool] = []
    sample_logits = SamplerChain.sample_logits

    def checking(self: SamplerChain, logits: Any) -> int:
        if self._grammar is not None:
            everywhere = self._allowed(np.arange(len(logits)), logits)["id"]
            checked.append(sorted(self._allowed_down_tree(logits)["id"]) == sorted(everywhere))
        return sample_logits(self, logits)

    monkeypatch.setattr(SamplerChain, "sample_logits", checking)
    varied = {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "ok": {"type": "boolean"},
            "kind": {"enum": ["sum", "product", "état"]},
            "notes": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "required": ["count", "ratio", "ok", "kind", "notes"],
    }
    requests = [
        critique(seed=seed, temperature=1.3, max_tokens=64, schema=None if seed % 2 else varied) for seed in range(4)
    ]
    run_together(host, requests)
    assert len(checked) > 100 and all(checked)


def test_prompt_tokens_and_grammar_match_create_chat_completion() -> None:
    from llama_cpp import Llama

    llama = Llama(model_path=str(embedded_model_path()), n_ctx=CTX_PER_SEQ, n_threads=2, verbose=False)
    captured: dict[str, Any] = {}

    def capture(**kwargs: Any) -> Any:
        captured.update(kwargs)
        raise LookupError("captured")  # stop before any decoding

    llama.create_completion = capture  # type: ignore[method-assign]
    prompts = ChatPrompts.for_model(llama._model, lambda text: llama.tokenize(text.encode(), False, True))
    assert prompts is not None
    conversations = [
        [ChatMessage(role="user", content="Hi <there> {{ braces }} ü")],
        [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="2+2?")],
        critique_messages("adversarial", Task(task_id="t", scenario="arithmetic", prompt="1+1?"), "Answer: 2").messages,
    ]
    for messages in conversations:
        request = ChatRequest(messages=messages, stop=["###"], json_schema=critique_json_schema())
        with pytest.raises(LookupError):
            llama.create_chat_completion(
                messages=[{"role": m.role, "content": m.content} for m in messages],
                stop=request.stop,
                response_format={"type": "json_object", "schema": request.json_schema},
            )
        generation = prompts.generation(request)
        assert list(generation.prompt) == captured["prompt"]
        assert [s.decode() for s in generation.stop] == captured["stop"]
        assert generation.grammar == captured["grammar"]._grammar
    assert grammar_for_schema(json.dumps(critique_json_schema())) == generation.grammar
    llama.close()


def test_stop_strings_cut_the_text_and_end_with_stop(host: LocalModelHost) -> None:
    [free] = run_together(host, [ask("Count from 1 to 20, separated by commas.", temperature=0.0, max_tokens=40)])
    words = free.text.split()
    assert len(words) >= 3, free.text
    stop = words[2]
    [stopped] = run_together(
        host, [ask("Count from 1 to 20, separated by commas.", temperature=0.0, max_tokens=40, stop=[stop])]
    )
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index(stop)]


def test_max_tokens_ends_with_length(host: LocalModelHost) -> None:
    [reply] = run_together(host, [ask("Write a long story about a dragon.", max_tokens=5)])
    assert reply.finish_reason == "length"
    assert reply.usage.output_tokens == 5
    assert reply.usage.input_tokens > 10


def test_json_schema_requests_stay_grammar_bound_in_a_batch(host: LocalModelHost) -> None:
    schema = critique_json_schema()
    requests = [critique(seed=seed, temperature=0.7, max_tokens=256) for seed in range(3)]
    replies = run_together(host, [*requests, ask("Name three fruits.")])
    for reply in replies[:3]:
        if reply.finish_reason == "length":  # a 135M model may ramble past the limit inside a string
            continue
        jsonschema.validate(json.loads(reply.text), schema)
        parse_report(reply.text)


def test_a_prompt_too_long_for_the_context_fails_alone(host: LocalModelHost) -> None:
    too_long = ask("word " * (CTX_PER_SEQ + 50))

    async def mixed() -> list[Completion | BaseException]:
        requests = [ask("Say hi.", seed=1), too_long, ask("Say bye.", seed=2)]
        return list(await asyncio.gather(*(host.complete(r) for r in requests), return_exceptions=True))

    short1, failed, short2 = asyncio.run(mixed())
    assert isinstance(failed, BackendError) and "context" in str(failed)
    assert isinstance(short1, Completion) and isinstance(short2, Completion)
    assert short1.usage.output_tokens > 0 and short2.usage.output_tokens > 0


def test_a_prompt_longer_than_one_batch_is_evaluated_over_several_steps() -> None:
    long_text = "The quick brown fox jumps over the lazy dog. " * 130  # about 1,300 tokens: more than a batch
    request = ask(long_text + "\nHow many foxes?", seed=3, max_tokens=8)
    host = LocalModelHost(str(embedded_model_path()), threads=2, parallel=2, ctx_per_seq=2 * BATCH_TOKENS)
    try:
        [alone] = run_together(host, [request])
        [batched, short] = run_together(host, [request, ask("Say hi.", seed=1, max_tokens=8)])
    finally:
        host.close()
    assert alone.usage.input_tokens > BATCH_TOKENS
    assert outcome(batched) == outcome(alone)
    assert short.usage.output_tokens > 0


def test_more_requests_than_slots_all_complete(host: LocalModelHost) -> None:
    requests = [
        ask(f"Give me a word that rhymes with {word}.", seed=i, max_tokens=12)
        for i, word in enumerate(
            ["cat", "dog", "sun", "tree", "blue", "red", "sky", "car", "moon", "star", "rain", "snow"]
        )
    ]
    replies = run_together(host, requests)
    assert len(replies) == 3 * PARALLEL
    assert all(r.finish_reason in ("stop", "length") and r.usage.calls == 1 for r in replies)
    assert all(0 < r.usage.output_tokens <= 12 for r in replies)


@contextmanager
def warm_host(parallel: int) -> Iterator[LocalModelHost]:
    """A host whose slot 0 keeps a one-token call's prompt; the others are empty."""
    host = new_host(parallel)
    try:
        run_together(host, [ask("Say yes.", seed=1, max_tokens=1)])
        yield host
    finally:
        host.close()


def story(number: int, *, max_tokens: int) -> ChatRequest:
    """A call that goes on for ``max_tokens`` (the model does not end a long story by itself that soon)."""
    return ask(f"Write a long story about dragon number {number}.", seed=number, max_tokens=max_tokens)


def assert_one_graph_per_step(steps: Counter[tuple[int, int]], *, sequences: int) -> None:
    """There were steps of `sequences` sequences, each decoded in one graph."""
    by_graphs = {graphs: n for (rows, graphs), n in steps.items() if rows == sequences}
    assert by_graphs.get(1, 0) > 0
    assert set(by_graphs) == {1}, f"steps of {sequences} sequences decoded in {by_graphs} graphs"


def test_a_step_decodes_its_sequences_in_slot_order_in_one_graph() -> None:
    # Slot 0 keeps the warm-up prompt, so the three calls take slots 1, 2 and then 0: admitted out of slot order.
    with warm_host(parallel=3) as host:
        replies = run_together(host, [story(i, max_tokens=30) for i in range(3)])
        steps = host.step_graphs()
    assert all(r.finish_reason == "length" for r in replies)
    assert_one_graph_per_step(steps, sequences=3)


def test_a_new_call_takes_the_kept_slot_between_the_generating_ones() -> None:
    with warm_host(parallel=4) as host:

        async def scenario() -> tuple[Counter[tuple[int, int]], Counter[tuple[int, int]]]:
            # Slots 1, 2, 3, 0 in turn. The one-token call (slot 0) ends first, the four-token one (slot 2)
            # next: the least recently kept is slot 0, beside one generating slot; slot 2 is between two.
            first = asyncio.ensure_future(host.complete(story(1, max_tokens=80)))
            four = asyncio.ensure_future(host.complete(story(2, max_tokens=4)))
            second = asyncio.ensure_future(host.complete(story(3, max_tokens=80)))
            one = asyncio.ensure_future(host.complete(story(4, max_tokens=1)))
            await asyncio.gather(four, one)
            before = host.step_graphs()
            late = await host.complete(story(5, max_tokens=20))
            after = host.step_graphs()
            assert late.finish_reason == "length" and not first.done() and not second.done()
            await asyncio.gather(first, second)
            return before, after

        before, after = asyncio.run(scenario())
    assert_one_graph_per_step(after - before, sequences=3)


@contextmanager
def admitted_together(host: LocalModelHost) -> Iterator[None]:
    """Holds the host's scheduler before its next admission: calls made meanwhile are admitted in one pass."""
    assert host._engine is not None
    with host._engine[0]._wake:  # a re-entrant lock: `submit` takes it again from this thread
        yield


def test_a_kept_prompt_that_a_waiting_call_has_is_not_given_to_another() -> None:
    again = ask("Name a color.", seed=5, max_tokens=6)
    with warm_host(parallel=3) as host:

        async def scenario() -> tuple[Completion, Completion, int]:
            first = await host.complete(again)  # slot 1, kept after it; slot 0 keeps the warm-up's
            running = asyncio.ensure_future(host.complete(story(1, max_tokens=80)))  # slot 2
            await asyncio.sleep(0.3)
            shared = host.prompts_shared()
            with admitted_together(host):
                # Slot 1 is beside the generating slot 2, but `again` waits for what it keeps: the new call
                # takes slot 0.
                other = asyncio.ensure_future(host.complete(ask("Name a tree.", seed=6, max_tokens=6)))
                twin = asyncio.ensure_future(host.complete(again))
                await asyncio.sleep(0)
            await asyncio.gather(other, running)
            return first, await twin, host.prompts_shared() - shared

        first, twin, shared = asyncio.run(scenario())
    assert shared == 1
    assert outcome(twin) == outcome(first)
