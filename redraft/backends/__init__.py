"""Model clients behind one async Protocol, selected by spec strings."""

from redraft.backends.base import Backend, BackendSpec, ChatRequest, Completion
from redraft.backends.registry import backend, resolve
from redraft.backends.scripted import ScriptedBackend, ScriptedSpec

__all__ = [
    "Backend",
    "BackendSpec",
    "ChatRequest",
    "Completion",
    "ScriptedBackend",
    "ScriptedSpec",
    "backend",
    "resolve",
]
