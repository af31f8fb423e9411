"""One llama.cpp sampler chain per sequence, built as llama-cpp-python builds it for a chat completion.

The chain (penalties, grammar, top-k 40, typical 1.0, top-p 0.95, min-p 0.05,
temperature, then a draw seeded with the request's seed) mirrors
``Llama._init_sampler`` with ``create_chat_completion``'s defaults, so the
batched path samples from the same distribution as the sequential one. The
seed lives in the chain, never in shared state: sequences never share a
random stream, which is what keeps batched runs reproducible.
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


class SamplerChain:
    """A llama.cpp sampler chain owned by one sequence; `close` frees it."""

    def __init__(self, lib: Any, model: Any, temperature: float, seed: int | None, grammar: str | None) -> None:
        self._lib = lib
        self._chain: Any = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        seed_value = lib.LLAMA_DEFAULT_SEED if seed is None else seed & 0xFFFFFFFF
        # Neutral penalties, as the sequential path has them: kept so the chains stay identical.
        self._add(lib.llama_sampler_init_penalties(model.n_vocab(), PENALTY_LAST_N, 1.0, 0.0, 0.0))
        if grammar is not None:
            grammar_sampler = lib.llama_sampler_init_grammar(model.vocab, grammar.encode("utf-8"), b"root")
            if not grammar_sampler:
                self.close()
                raise BackendError("llama.cpp could not parse the grammar made from the JSON schema")
            self._add(grammar_sampler)
        if temperature < 0.0:
            self._add(lib.llama_sampler_init_dist(seed_value))
        elif temperature == 0.0:
            self._add(lib.llama_sampler_init_greedy())
        else:
            self._add(lib.llama_sampler_init_top_k(TOP_K))
            self._add(lib.llama_sampler_init_typical(TYPICAL_P, 1))
            self._add(lib.llama_sampler_init_top_p(TOP_P, 1))
            self._add(lib.llama_sampler_init_min_p(MIN_P, 1))
            self._add(lib.llama_sampler_init_temp(temperature))
            self._add(lib.llama_sampler_init_dist(seed_value))

    def _add(self, sampler: Any) -> None:
        self._lib.llama_sampler_chain_add(self._chain, sampler)

    def sample(self, context: Any, index: int) -> int:
        """Draw (and accept) a token from the logits of batch row `index`."""
        return int(self._lib.llama_sampler_sample(self._chain, context, index))

    def sample_logits(self, logits: Any) -> int:
        """Draw (and accept) a token from a logits row kept from an earlier decode (a float32 numpy array).

        What `llama_sampler_sample` does with a row of the context (llama.h spells it out): every token
        with its logit and p 0, unsorted, through the chain, then the selected token accepted.
        """
        lib = self._lib
        candidates = np.zeros(len(logits), dtype=_TOKEN_DATA)
        candidates["id"] = np.arange(len(logits), dtype=np.int32)
        candidates["logit"] = logits
        array = lib.llama_token_data_array(
            data=candidates.ctypes.data_as(ctypes.POINTER(lib.llama_token_data)),
            size=len(candidates),
            selected=-1,
            sorted=False,
        )
        lib.llama_sampler_apply(self._chain, ctypes.byref(array))
        if not 0 <= array.selected < array.size:
            raise BackendError("llama.cpp's sampler chain selected no token")
        token = int(array.data[array.selected].id)
        lib.llama_sampler_accept(self._chain, token)
        return token

    def close(self) -> None:
        if self._chain is not None:
            self._lib.llama_sampler_free(self._chain)
            self._chain = None


def token_piece(lib: Any, vocab: Any, token: int) -> bytes:
    """The bytes a token stands for; special tokens render as nothing, as in ``Llama.detokenize``."""
    buffer = ctypes.create_string_buffer(64)
    size = lib.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, False)
    if size < 0:
        buffer = ctypes.create_string_buffer(-size)
        size = lib.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, False)
    return buffer.raw[:size]
