"""A response cache in front of any backend: a call already answered is never paid twice.

The key is a hash of the backend spec and the whole request: messages, sampling
parameters, the JSON schema, and the seed, which the arbiter derives from (run
seed, task, round, sample), so distinct samples stay distinct while a retried or
resumed call finds its answer. Entries live in SQLite on each node's disk, in
``$REDRAFT_CACHE_DIR`` or ``~/.cache/redraft`` (``responses.sqlite``); a node
only sees its own entries, so a call retried on another node may be paid again.

A hit returns the completion with the usage it had when it was paid for, and
``cache_hits=1``, so a resumed run's totals equal those of an uninterrupted one
and the summary still says how much was served from the cache. The scripted
test double is never cached (its replies are not a function of the request).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

from redraft.backends.base import Backend, ChatRequest, Completion

_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder = msgspec.msgpack.Decoder(Completion)


def cache_dir() -> Path:
    return Path(os.environ.get("REDRAFT_CACHE_DIR") or Path.home() / ".cache" / "redraft")


class ResponseCache:
    """A SQLite table of completions by request key; safe to share between threads."""

    def __init__(self, path: Path, *, open_timeout_s: float = 30.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=10.0, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        # Several actors on a node open the file at once (they start in parallel). Switching a new
        # file to WAL takes an exclusive lock, and SQLite answers "database is locked" to the losers
        # at once instead of calling the busy handler, so the set-up is retried until it holds.
        deadline = time.monotonic() + open_timeout_s
        for pause in _backoff():
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, completion BLOB)")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() + pause > deadline:
                    raise sqlite3.OperationalError(f"{exc} (the response cache {path} stayed locked)") from exc
            time.sleep(pause)

    @staticmethod
    def key(spec: str, request: ChatRequest) -> str:
        return hashlib.sha256(spec.encode() + b"\0" + _encoder.encode(request)).hexdigest()

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else _decoder.decode(row[0])

    def put(self, key: str, completion: Completion) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, completion) VALUES (?, ?)", (key, _encoder.encode(completion))
            )


class CachedBackend:
    """Answers from the cache when it can, else from ``inner`` (and remembers the answer)."""

    def __init__(self, inner: Backend, spec: str, cache: ResponseCache) -> None:
        self._inner = inner
        self._spec = spec
        self._cache = cache

    async def complete(self, request: ChatRequest) -> Completion:
        key = ResponseCache.key(self._spec, request)
        hit = await asyncio.to_thread(self._cache.get, key)
        if hit is not None:
            return msgspec.structs.replace(hit, usage=msgspec.structs.replace(hit.usage, cache_hits=1))
        completion = await self._inner.complete(request)
        await asyncio.to_thread(self._cache.put, key, completion)
        return completion


def _backoff() -> Iterator[float]:
    """Pauses between attempts: 10 ms doubling to 0.5 s, jittered so contenders do not retry in step."""
    pause = 0.01
    while True:
        yield pause * random.uniform(0.5, 1.5)
        pause = min(pause * 2, 0.5)


_OPEN: dict[Path, ResponseCache] = {}
_OPEN_LOCK = threading.Lock()


def cached(backend: Backend, spec: str, *, enabled: bool) -> Backend:
    """``backend`` behind this node's response cache, unless disabled or a scripted double."""
    if not enabled or spec.startswith("scripted"):
        return backend
    path = cache_dir() / "responses.sqlite"
    with _OPEN_LOCK:
        if path not in _OPEN:
            _OPEN[path] = ResponseCache(path)
    return CachedBackend(backend, spec, _OPEN[path])
