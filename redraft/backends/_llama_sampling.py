"""One llama.cpp sampler chain per sequence, built as llama-cpp-python builds it for a chat completion.

The chain (penalties, grammar, top-k 40, typical 1.0, top-p 0.95, min-p 0.05,
temperature, then a draw seeded with the request's seed) mirrors
``Llama._init_sampler`` with ``create_chat_completion``'s defaults, so the
batched path samples from the same distribution as the sequential one. The
seed lives in the chain, never in shared state: sequences never share a
random stream, which is what keeps batched runs reproducible.

A grammar-bound draw finds the k best tokens the grammar allows with far less matching (a shortlist, then a token
tree), and keeps the same array, in the same order, as llama.cpp would: the draw is the same and consumes the same
random number.

See docs/architecture.md, section "Sampling under a grammar".
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from redraft.errors import BackendError

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
"""llama.cpp's ``llama_token_data``, as a numpy record (12 bytes, no padding)."""

TOP_K = 40
TOP_P = 0.95
MIN_P = 0.05
TYPICAL_P = 1.0
PENALTY_LAST_N = 64
SHORTLIST = 512
"""How many of the highest-logit tokens a grammar-bound draw matches first (of the vocabulary's 49k)."""


class TokenTree:
    """The vocabulary as a tree: each token under the longest other token its text begins with.

    Texts are llama.cpp's own for grammar matching (special tokens spelt out).
    End-of-generation tokens are roots without children: the grammar decides them
    by its state, not by their text. Built once per model.
    """

    def __init__(self, lib: Any, vocab: Any, n_vocab: int) -> None:
        pieces = [token_piece(lib, vocab, token, special=True) for token in range(n_vocab)]
        end = [bool(lib.llama_vocab_is_eog(vocab, token)) for token in range(n_vocab)]
        by_piece: dict[bytes, int] = {}
        for token, piece in enumerate(pieces):
            if piece and not end[token]:
                by_piece.setdefault(piece, token)
        parent = np.full(n_vocab, -1, dtype=np.int64)
        for token, piece in enumerate(pieces):
            if end[token]:
                continue
            for cut in range(len(piece) - 1, 0, -1):
                above = by_piece.get(piece[:cut])
                if above is not None:
                    parent[token] = above
                    break
        order = np.argsort(parent, kind="stable").astype(np.int32)
        first_child = np.searchsorted(parent[order], np.arange(-1, n_vocab + 1))
        self.roots = order[: first_child[1]]
        self._children = order
        self._start = first_child[1:-1]
        self._count = first_child[2:] - first_child[1:-1]

    def children(self, tokens: Any) -> Any:
        """The children of all of `tokens` (an int array), in one array."""
        counts = self._count[tokens]
        total = int(counts.sum())
        if total == 0:
            return self._children[:0]
        starts = np.repeat(self._start[tokens] - np.cumsum(counts) + counts, counts)
        return self._children[starts + np.arange(total)]


class SamplerChain:
    """A llama.cpp sampler chain owned by one sequence; `close` frees it.

    The grammar, if any, is a sampler of its own, applied where the chain would
    apply it (after the neutral penalties, before top-k); `sample` and
    `sample_logits` then take the shortlist path above when they can.
    """

    def __init__(
        self,
        lib: Any,
        model: Any,
        temperature: float,
        seed: int | None,
        grammar: str | None,
        tree: TokenTree | None = None,
    ) -> None:
        self._lib = lib
        self._tree = tree
        self._chain: Any = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        self._grammar: Any = None
        self._n_vocab = int(model.n_vocab())
        self._top_k = 0
        """How many tokens survive the chain's truncation, if it truncates to a fixed count (else 0)."""
        self.shortlisted = 0
        """Grammar-bound draws the shortlist or the token tree settled."""
        self.full_matches = 0
        """Grammar-bound draws that matched the grammar against the whole vocabulary."""
        seed_value = lib.LLAMA_DEFAULT_SEED if seed is None else seed & 0xFFFFFFFF
        # Neutral penalties, as the sequential path has them: kept so the chains stay identical. llama.cpp
        # skips neutral penalties when applying the chain, so the grammar may run apart from it.
        self._add(lib.llama_sampler_init_penalties(model.n_vocab(), PENALTY_LAST_N, 1.0, 0.0, 0.0))
        if grammar is not None:
            self._grammar = lib.llama_sampler_init_grammar(model.vocab, grammar.encode("utf-8"), b"root")
            if not self._grammar:
                self._grammar = None
                self.close()
                raise BackendError("llama.cpp could not parse the grammar made from the JSON schema")
        if temperature < 0.0:
            self._add(lib.llama_sampler_init_dist(seed_value))
        elif temperature == 0.0:
            self._add(lib.llama_sampler_init_greedy())
            self._top_k = 1  # greedy keeps the first token of highest logit
        else:
            self._add(lib.llama_sampler_init_top_k(TOP_K))
            self._add(lib.llama_sampler_init_typical(TYPICAL_P, 1))
            self._add(lib.llama_sampler_init_top_p(TOP_P, 1))
            self._add(lib.llama_sampler_init_min_p(MIN_P, 1))
            self._add(lib.llama_sampler_init_temp(temperature))
            self._add(lib.llama_sampler_init_dist(seed_value))
            self._top_k = TOP_K

    def _add(self, sampler: Any) -> None:
        self._lib.llama_sampler_chain_add(self._chain, sampler)

    def sample(self, context: Any, index: int) -> int:
        """Draw (and accept) a token from the logits of batch row `index`."""
        lib = self._lib
        if self._grammar is None:
            return int(lib.llama_sampler_sample(self._chain, context, index))
        row = lib.llama_get_logits_ith(context, index)
        return self.sample_logits(
            np.ctypeslib.as_array(ctypes.cast(row, ctypes.POINTER(ctypes.c_float)), (self._n_vocab,))
        )

    def sample_logits(self, logits: Any) -> int:
        """Draw (and accept) a token from a logits row (a float32 numpy array, not modified).

        What `llama_sampler_sample` does with a row of the context (llama.h spells it out): every token
        with its logit and p 0, unsorted, through the chain, then the selected token accepted.
        """
        candidates = None
        if self._grammar is not None and self._top_k:
            candidates = self._shortlist(logits)
            if candidates is None and self._tree is not None:
                candidates = self._walk_tree(logits)
        if candidates is not None:
            self.shortlisted += 1
        else:
            candidates = np.zeros(len(logits), dtype=_TOKEN_DATA)
            candidates["id"] = np.arange(len(logits), dtype=np.int32)
            candidates["logit"] = logits
            if self._grammar is not None:
                self.full_matches += 1
                self._apply(self._grammar, candidates)
        token = self._apply(self._chain, candidates)
        self._accept(token)
        return token

    def _shortlist(self, logits: Any) -> Any:
        """What top-k keeps, found among the `SHORTLIST` best tokens; None if they do not settle it."""
        n = len(logits)
        size = min(SHORTLIST, n - 1)
        order = np.argpartition(logits, (n - size - 1, n - size))
        best = order[n - size :]
        allowed = self._allowed(best, logits)
        if len(allowed) < self._top_k or allowed["logit"][self._top_k - 1] <= logits[order[n - size - 1]]:
            return None  # fewer than k pass, or one outside the shortlist could rank among them
        return self._kept(allowed)

    def _walk_tree(self, logits: Any) -> Any:
        """What top-k keeps, from every token the grammar allows, found down the token tree."""
        allowed = self._allowed_down_tree(logits)
        if not len(allowed):
            return None  # a grammar with no way on: llama.cpp's own handling decides
        return self._kept(allowed[np.argsort(-allowed["logit"], kind="stable")])

    def _allowed_down_tree(self, logits: Any) -> Any:
        """Every token the grammar allows now (as `_TOKEN_DATA`), matching only the children of those that
        passed."""
        assert self._tree is not None
        found, level = [], self._tree.roots
        while len(level):
            passed = self._allowed(level, logits)
            found.append(passed)
            level = self._tree.children(passed["id"])
        return np.concatenate(found)

    def _allowed(self, tokens: Any, logits: Any) -> Any:
        """The `tokens` the grammar allows now, as `_TOKEN_DATA`, in order of logit, highest first."""
        tokens = tokens[np.argsort(-logits[tokens], kind="stable")]
        candidates = np.zeros(len(tokens), dtype=_TOKEN_DATA)
        candidates["id"] = tokens
        candidates["logit"] = logits[tokens]
        self._apply(self._grammar, candidates)
        return candidates[np.isfinite(candidates["logit"])]

    def _kept(self, allowed: Any) -> Any:
        """The first k of `allowed` (sorted, highest logit first), or None if a tie leaves their order (or
        which make the cut) to llama.cpp's sort."""
        head = allowed["logit"][: self._top_k + 1]
        if np.any(head[1:] >= head[:-1]):
            return None
        return allowed[: self._top_k].copy()

    def _apply(self, sampler: Any, candidates: Any) -> int:
        """Run `candidates` (a `_TOKEN_DATA` array, changed in place) through `sampler`; the token it selects."""
        lib = self._lib
        array = lib.llama_token_data_array(
            data=candidates.ctypes.data_as(ctypes.POINTER(lib.llama_token_data)),
            size=len(candidates),
            selected=-1,
            sorted=False,
        )
        lib.llama_sampler_apply(sampler, ctypes.byref(array))
        if sampler is self._grammar:
            return -1
        if not 0 <= array.selected < array.size:
            raise BackendError("llama.cpp's sampler chain selected no token")
        return int(array.data[array.selected].id)

    def _accept(self, token: int) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_accept(self._grammar, token)
        self._lib.llama_sampler_accept(self._chain, token)

    def close(self) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        if self._chain is not None:
            self._lib.llama_sampler_free(self._chain)
            self._chain = None


def token_piece(lib: Any, vocab: Any, token: int, *, special: bool = False) -> bytes:
    """The bytes a token stands for; special tokens render as nothing unless `special`, as in
    ``Llama.detokenize``."""
    buffer = ctypes.create_string_buffer(64)
    size = lib.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, special)
    if size < 0:
        buffer = ctypes.create_string_buffer(-size)
        size = lib.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, special)
    return buffer.raw[:size]
