"""The model host's sequential path: one llama-cpp-python ``Llama``, calls one at a time behind a lock.

`redraft.backends.local.LocalModelHost` takes it for a model whose chat format llama-cpp-python does not take from
a Jinja template, and with ``batched=False``. Its threads follow the machine as the batched path's do
(`redraft.backends._llama_threads`), measured over whole calls: the calling thread is llama.cpp's first worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from redraft.backends._llama_threads import ThreadGovernor
from redraft.backends.base import ChatRequest, Completion
from redraft.errors import BackendError
from redraft.protocols.messages import Usage


class SequentialModel:
    """One ``Llama`` loaded on the first call (the file from ``resolve``), serving one call at a time."""

    def __init__(self, resolve: Callable[[], str], name: Callable[[], str], *, ctx: int, threads: int) -> None:
        self._resolve, self._name = resolve, name
        self._ctx = ctx
        # A thread lock, not an asyncio one: the in-process host may serve several event loops.
        self._lock = threading.Lock()
        self._llama: Any = None
        self._lib: Any = None
        self.governor = ThreadGovernor(threads, apply=self._set_threads)
        self.finished = 0
        """Calls finished."""
        self.tokens = 0
        """Tokens the finished calls generated."""

    def run(self, request: ChatRequest) -> Completion:
        with self._lock:
            llama = self._load()
            done = self.governor.timed(lambda: self._complete(llama, request))
            self.finished += 1
            self.tokens += done.usage.output_tokens
            return done

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

    def _set_threads(self, threads: int) -> None:
        """The governor's count, on the loaded model (it decides only after a call, under the lock)."""
        self._lib.llama_set_n_threads(self._llama._ctx.ctx, threads, threads)

    def _load(self) -> Any:
        if self._llama is None:
            from redraft.backends._llama_context import key_type, llama_module

            self._lib = llama_module()
            self._llama = self._lib.Llama(
                model_path=self._resolve(),
                n_ctx=self._ctx,
                n_threads=self.governor.threads,
                type_k=key_type(self._lib),
                verbose=False,
            )
        return self._llama

    def _complete(self, llama: Any, request: ChatRequest) -> Completion:
        kwargs: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stop": request.stop or None,
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
        started = time.perf_counter()
        try:
            reply = llama.create_chat_completion(**kwargs)
        except ValueError as exc:  # e.g. the prompt does not fit the context
            raise BackendError(f"llama.cpp rejected the request: {exc}") from None
        choice = reply["choices"][0]
        usage = reply.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens", 0)),
                output_tokens=int(usage.get("completion_tokens", 0)),
                calls=1,
            ),
            model=self._name(),
            finish_reason=str(choice.get("finish_reason") or ""),
            latency_s=time.perf_counter() - started,
        )
