"""Model clients behind one async Protocol, selected by spec strings."""

from redraft.backends._batch import MAX_WAITING, BatchCollector, BatchedSpec, BatchSettings
from redraft.backends._batch_apis import batchable
from redraft.backends._batch_journal import JOURNAL, BatchRun, recover_journal
from redraft.backends._ratelimit import LIMITER_PREFIX, EndpointState
from redraft.backends._vitals import HOST_PREFIX, HostVitals
from redraft.backends.base import Backend, BackendSpec, ChatRequest, Completion
from redraft.backends.registry import backend, resolve
from redraft.backends.scripted import ScriptedBackend, ScriptedSpec

__all__ = [
    "HOST_PREFIX",
    "JOURNAL",
    "LIMITER_PREFIX",
    "MAX_WAITING",
    "Backend",
    "BackendSpec",
    "BatchCollector",
    "BatchRun",
    "BatchSettings",
    "BatchedSpec",
    "ChatRequest",
    "Completion",
    "EndpointState",
    "HostVitals",
    "ScriptedBackend",
    "ScriptedSpec",
    "backend",
    "batchable",
    "recover_journal",
    "resolve",
]
