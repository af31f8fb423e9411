"""llama.cpp's bindings, and the model and context that the batched host decodes with.

`load` sets a context up as the invariants of `redraft.backends._llama_batch` need it: one KV
stream per sequence, flash attention off, at most `BATCH_TOKENS` tokens a decode. The sequential
path (`redraft.backends.local`) loads its ``Llama`` with `llama_module` and `key_type` too. Other
modules import all of these from `redraft.backends._llama_batch`.
"""

from __future__ import annotations

import importlib
from typing import Any

from redraft.errors import BackendError

BATCH_TOKENS = 1024
"""The most tokens one decode step evaluates; longer prompts are evaluated over several steps."""


def llama_module() -> Any:
    """llama-cpp-python's ctypes bindings, imported on first use (an optional dependency), with llama.cpp's
    own logging off: at its default level it writes a line per graph it builds (each decode step) and per
    tensor it quantizes."""
    try:
        lib = importlib.import_module("llama_cpp")
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BackendError(f"the local backend needs llama-cpp-python: {exc}") from None
    importlib.import_module("llama_cpp._logger").set_verbose(False)
    return lib


def key_type(lib: Any) -> int:
    """The KV cache's type for keys, on both of the host's paths: Q8_0 rather than llama.cpp's F16.

    Attention's dot products over Q8_0 keys run as int8 products instead of F16 ones, so a decode step
    takes less time, and the embedded model's perplexity does not suffer (`benchmarks/bench_quantization.py`
    measures both). Values stay F16: llama.cpp quantizes them only with flash attention, which the host
    keeps off.
    """
    return int(lib.GGML_TYPE_Q8_0)


def load(model_path: str, *, parallel: int, ctx_per_seq: int, threads: int, keys: int | None = None) -> tuple[Any, Any]:
    """The model and a llama.cpp context for `parallel` sequences, each with a KV stream of `ctx_per_seq`
    cells (llama-cpp-python's ``LlamaModel`` and ``LlamaContext``): the settings the batching invariants need.
    ``keys``: the keys' ggml type, `key_type` unless given (a benchmark compares types)."""
    lib = llama_module()
    internals = importlib.import_module("llama_cpp._internals")
    model = internals.LlamaModel(path_model=model_path, params=lib.llama_model_default_params(), verbose=False)
    params = lib.llama_context_default_params()
    params.n_ctx = ctx_per_seq * parallel
    params.n_batch = min(BATCH_TOKENS, params.n_ctx)
    params.n_ubatch = min(params.n_ubatch, params.n_batch)
    params.n_seq_max = parallel
    params.kv_unified = False  # one KV stream per sequence: see the module docstring
    params.n_threads = params.n_threads_batch = threads
    params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED  # its logits depend on how a prompt is split
    params.type_k = key_type(lib) if keys is None else keys
    return model, internals.LlamaContext(model=model, params=params, verbose=False)


def tokenize(model: Any, text: str) -> list[int]:
    """A prompt's tokens, special tokens parsed and no BOS added (the chat template writes its own)."""
    tokens: list[int] = model.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    return tokens
