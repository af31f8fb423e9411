"""Continuous batching for llama.cpp: one scheduler thread owns the context, callers wait on futures.

`BatchScheduler` decodes the next token of up to ``parallel`` sequences in one
``llama_decode`` per step. A request that arrives while others decode takes a
free sequence slot at the next step; its prompt is evaluated on its own, between
two steps of the others (see `BatchScheduler._step` for why not with them).

This module is the scheduler, and the batched path's interface: it builds on modules
private to the package and exports what their callers use. `_llama_context` loads
llama.cpp and the model (`llama_module`, `load`, `tokenize`, `key_type`, `BATCH_TOKENS`);
`_llama_sequence` holds a request (`Generation`), its result (`Generated`) and its
sequence's state; `_llama_slots` chooses each request's slot and fills its KV stream
(`graphs`).

Invariants: only the scheduler thread touches the llama.cpp context, the batch and the samplers; a sequence id
belongs to one request at a time; every sequence has its own KV stream and seeded sampler chain, so the same
(prompt, seed, temperature) gives the same tokens alone or batched; a shared prompt or a reused prefix gives
bitwise the logits and KV cells the request would have computed itself; a request that cannot fit its context fails
alone, and the scheduler keeps serving.

See docs/architecture.md, section "Continuous batching: the invariants".
"""

from __future__ import annotations

import ctypes
import threading
from collections import Counter, deque
from concurrent.futures import Future
from typing import Any

import numpy as np

from redraft.backends._llama_context import BATCH_TOKENS, key_type, llama_module, load, tokenize
from redraft.backends._llama_sampling import SamplerChain, TokenTree, token_piece
from redraft.backends._llama_sequence import Generated, Generation, Sequence
from redraft.backends._llama_slots import Slots, graphs
from redraft.backends._llama_threads import ThreadGovernor
from redraft.errors import BackendError, ContextTooLong

__all__ = [
    "BATCH_TOKENS",
    "BatchScheduler",
    "Generated",
    "Generation",
    "graphs",
    "key_type",
    "llama_module",
    "load",
    "tokenize",
]


class BatchScheduler:
    """Serves `Generation` requests from one llama.cpp context, many sequences at once."""

    def __init__(self, model_path: str, *, parallel: int, ctx_per_seq: int, threads: int) -> None:
        self.parallel = parallel
        self.ctx_per_seq = ctx_per_seq
        self._lib = llama_module()
        self.model, self._context = load(model_path, parallel=parallel, ctx_per_seq=ctx_per_seq, threads=threads)
        self._batch: Any = self._lib.llama_batch_init(self._context.params.n_batch, 0, 1)
        self.governor = ThreadGovernor(threads, apply=lambda n: self._lib.llama_set_n_threads(self._context.ctx, n, n))
        """The threads each decode runs with: fewer while other work crowds the cores (`_llama_threads`)."""
        self._waiting: deque[Sequence] = deque()
        self._slots = Slots(self._lib, self._context.memory, parallel)
        self._n_vocab = int(self.model.n_vocab())
        self._active: list[Sequence] = []
        self._tree: TokenTree | None = None
        """The vocabulary as a tree, for grammar-bound draws: built on the first."""
        self._wake = threading.Condition()
        self._closing = False
        self.prompts_shared = 0
        """Requests whose prompt was copied from a twin's KV stream instead of evaluated (read by benchmarks)."""
        self.prefix_tokens_reused = 0
        """Prompt tokens not evaluated because a slot's stream held them (`Slots.reuse_prefix`; read by benchmarks)."""
        self.step_graphs: Counter[tuple[int, int]] = Counter()
        self.generated = 0
        """Tokens generated so far, as completions count them (read by the host's vitals)."""
        self.steps = 0
        """Decodes so far (a token of every generating sequence, or a prompt): the host's progress."""
        """Generation steps by (sequences, graphs llama.cpp decoded them in): see `_step` (read by tests and
        benchmarks)."""
        self.grammar_draws = [0, 0]
        """Grammar-bound draws of finished sequences: settled on the shortlist, and matched against the whole
        vocabulary (`llama_sampling.SHORTLIST`; read by tests and benchmarks)."""
        self._thread = threading.Thread(target=self._serve, name="llama-batch-scheduler", daemon=True)
        self._thread.start()

    # -- callers' side -------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        return tokenize(self.model, text)

    def submit(self, request: Generation) -> Future[Generated]:
        future: Future[Generated] = Future()
        if len(request.prompt) >= self.ctx_per_seq:
            future.set_exception(
                ContextTooLong(
                    f"the prompt has {len(request.prompt)} tokens; the context holds {self.ctx_per_seq} per sequence"
                )
            )
            return future
        with self._wake:
            if self._closing:
                raise BackendError("the model host is closed")
            self._waiting.append(Sequence(request=request, future=future))
            self._wake.notify()
        return future

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()
        self._lib.llama_batch_free(self._batch)
        self._context.close()
        self.model.close()

    # -- the scheduler thread ------------------------------------------------

    def _serve(self) -> None:
        while self._admit():
            try:
                self._step()
            except Exception as exc:  # a bug here must fail the calls, not leave them waiting forever
                for sequence in list(self._active):
                    self._release(sequence, BackendError(f"the batched decode failed: {exc!r}"))
        for sequence in list(self._active):
            self._release(sequence, BackendError("the model host closed during the request"))

    def _admit(self) -> bool:
        """Move waiting requests into free slots; block while there is nothing to do. False: stop."""
        with self._wake:
            while not self._active and not self._waiting and not self._closing:
                self._wake.wait()
            if self._closing:
                for sequence in self._waiting:
                    sequence.fail(BackendError("the model host closed before the request ran"))
                self._waiting.clear()
                return False
            while self._waiting and self._slots.any_free:
                sequence = self._waiting.popleft()
                if sequence.future.set_running_or_notify_cancel():
                    self._start(sequence)
        return True

    def _start(self, sequence: Sequence) -> None:
        request = sequence.request
        sequence.slot, kept, held = self._slots.take(request.prompt, self._active, self._waiting)
        room = self.ctx_per_seq - len(request.prompt)
        # As llama-cpp-python: no positive max_tokens means "until the context is full".
        sequence.max_tokens = min(request.max_tokens, room) if request.max_tokens > 0 else room
        try:
            tree = self._token_tree() if request.grammar is not None else None
            sequence.sampler = SamplerChain(
                self._lib, self.model, request.temperature, request.seed, request.grammar, tree
            )
        except BackendError as exc:
            self._release(sequence, exc)
            return
        self._active.append(sequence)
        if kept is not None:  # the slot still holds this prompt: draw the first token from its logits
            self.prompts_shared += 1
            self._draw_first(sequence, kept)
        elif not self._share_prompt(sequence):
            sequence.held, sequence.pending = held, list(request.prompt)  # `_step` places it when its turn comes

    def _token_tree(self) -> TokenTree:
        if self._tree is None:
            self._tree = TokenTree(self._lib, self.model.vocab, self._n_vocab)
        return self._tree

    def _share_prompt(self, sequence: Sequence) -> bool:
        """Reuse the prompt evaluation of an active sequence with the same prompt, if there is one."""
        prompt = sequence.request.prompt
        for twin in self._active:
            if twin is sequence or twin.request.prompt != prompt:
                continue
            if twin.first_logits is not None:
                # Its stream holds the prompt: copy it, drop what follows, draw from the prompt's logits.
                self._slots.copy(twin.slot, sequence.slot)
                self._slots.cut(sequence.slot, len(prompt))
                self.prompts_shared += 1
                self._draw_first(sequence, twin.first_logits)
            elif twin.pending:
                twin.followers.append(sequence)  # its prompt is being evaluated: copy it when done
                self.prompts_shared += 1
            else:
                continue  # itself a follower, with nothing in its stream yet
            return True
        return False

    def _draw_first(self, sequence: Sequence, logits: Any) -> None:
        """The first token of a sequence whose stream holds its whole prompt, from the prompt's logits."""
        assert sequence.sampler is not None
        sequence.position, sequence.first_logits = len(sequence.request.prompt), logits
        self._take(sequence, sequence.sampler.sample_logits(logits))

    def _step(self) -> None:
        """One decode of every generating sequence's next token, then one of the oldest waiting prompt.

        Prompts are never evaluated in the same decode as other sequences' tokens: llama.cpp
        splits a mixed batch into per-sequence chunks whose sizes depend on the others, and a
        prompt evaluated in such chunks can come out with other logits than alone. A decode of
        one token per sequence gives each the logits it has alone (the batching tests compare
        texts alone and batched).

        A prompt's prefix is looked up when its evaluation starts, not when it is admitted:
        prompts that arrive together with a common prefix (a task's K critiques) then find it
        in the stream of the first.

        The generating rows go in slot order. With a KV stream per sequence, llama.cpp puts
        in one graph only sequences whose ids follow one another (``split_equal`` with
        ``sequential``): rows in admission order, or taken slots with gaps, cost one graph
        per run of consecutive ids, each reading every weight. `Slots.take` keeps the taken
        slots together.
        """
        self.steps += 1
        generating = sorted((s for s in self._active if len(s.pending) == 1 and s.held is None), key=lambda s: s.slot)
        if generating:
            self.step_graphs[len(generating), graphs([s.slot for s in generating])] += 1
        self._decode(generating)
        prompts = [s for s in self._active if len(s.pending) > 1 or s.held is not None]
        if prompts:
            first = prompts[0]
            if first.held is not None:  # its turn: start from what any stream holds now (the prompts before it)
                first.position = self._slots.reuse_prefix(first.slot, first.held, first.request.prompt, self._active)
                self.prefix_tokens_reused += first.position
                first.pending, first.held = list(first.request.prompt[first.position :]), None
            self._decode([first])

    def _decode(self, sequences: list[Sequence]) -> None:
        outputs = self._fill_batch(sequences)
        if not sequences:
            return
        code = self.governor.timed(lambda: self._lib.llama_decode(self._context.ctx, self._batch))
        if code != 0:
            for sequence in sequences:
                self._release(sequence, BackendError(f"llama_decode failed with code {code}"))
            return
        for sequence, index in outputs:
            for follower in sequence.followers:
                self._slots.copy(sequence.slot, follower.slot)
                follower.position = sequence.position
                self._sample(follower, index)
            sequence.followers.clear()
            self._sample(sequence, index)

    def _fill_batch(self, sequences: list[Sequence]) -> list[tuple[Sequence, int]]:
        """Put the sequences' pending tokens in the batch, as many as fit.

        Returns the sequences to sample after the decode, with their logits rows (a prompt
        longer than the batch gets its logits only with its last part).
        """
        batch, budget = self._batch, self._batch_capacity()
        batch.n_tokens = 0
        outputs: list[tuple[Sequence, int]] = []
        for sequence in sequences:
            take = sequence.pending[: budget - batch.n_tokens]
            for token in take:
                i = batch.n_tokens
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, sequence.position, 1
                batch.seq_id[i][0], batch.logits[i] = sequence.slot, False
                batch.n_tokens += 1
                sequence.position += 1
            del sequence.pending[: len(take)]
            if not sequence.pending:
                batch.logits[batch.n_tokens - 1] = True
                outputs.append((sequence, batch.n_tokens - 1))
        return outputs

    def _batch_capacity(self) -> int:
        return int(self._context.params.n_batch)

    def _sample(self, sequence: Sequence, index: int) -> None:
        assert sequence.sampler is not None
        if sequence.first_logits is None:  # its prompt's: kept for twins of the prompt
            row = self._lib.llama_get_logits_ith(self._context.ctx, index)
            sequence.first_logits = np.ctypeslib.as_array(
                ctypes.cast(row, ctypes.POINTER(ctypes.c_float)), (self._n_vocab,)
            ).copy()
        self._take(sequence, sequence.sampler.sample(self._context.ctx, index))

    def _take(self, sequence: Sequence, token: int) -> None:
        """Record a drawn token: the sequence goes on (the token is its next to evaluate) or ends."""
        finish = self._accept(sequence, token)
        if finish is None:
            sequence.pending = [token]
            return
        text = sequence.text.decode("utf-8", errors="ignore")
        result = Generated(text, len(sequence.request.prompt), len(sequence.tokens), finish)
        self._release(sequence, None)
        sequence.future.set_result(result)

    def _accept(self, sequence: Sequence, token: int) -> str | None:
        """Record a sampled token; the finish reason if the sequence is done ('stop' or 'length')."""
        if self._lib.llama_vocab_is_eog(self.model.vocab, token):
            return "stop"
        self.generated += 1
        return sequence.add(token, token_piece(self._lib, self.model.vocab, token))

    def _release(self, sequence: Sequence, error: BackendError | None) -> None:
        """Free the sequence's slot, KV cells and sampler; fail its followers and itself if `error`."""
        for follower in sequence.followers:
            self._release(follower, error or BackendError("the shared prompt was not evaluated"))
        sequence.followers.clear()
        if sequence in self._active:
            self._active.remove(sequence)
        if sequence.sampler is not None:
            self.grammar_draws[0] += sequence.sampler.shortlisted
            self.grammar_draws[1] += sequence.sampler.full_matches
            sequence.sampler.close()
            sequence.sampler = None
        if sequence.slot >= 0:
            keep = error is None and sequence.first_logits is not None  # keep the prompt for a later twin
            self._slots.release(sequence.slot, (sequence.request.prompt, sequence.first_logits) if keep else None)
            sequence.slot = -1
        if error is not None:
            sequence.fail(error)
