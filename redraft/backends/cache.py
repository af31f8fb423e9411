"""A response cache in front of any backend: a call already answered is never paid twice.

The key is a hash of the backend spec and the whole request (its provider-caching hints
at their defaults: they change no answer): messages, sampling parameters, the JSON
schema, and the seed, which the arbiter derives from (run seed, task, round, sample),
so distinct samples stay distinct while a retried or resumed call finds its answer.
Entries live in SQLite on each node's disk, in
``$REDRAFT_CACHE_DIR`` or ``~/.cache/redraft`` (``responses.sqlite``, beside an
empty ``responses.sqlite.lock`` that processes opening it take turns on); a node
only sees its own entries, so a call retried on another node may be paid again.

A hit returns the completion with the usage it had when it was paid for, and
``cache_hits=1``, so a resumed run's totals equal those of an uninterrupted one
and the summary still says how much was served from the cache. Each entry also
records who paid for it (its *payer*: a run directory's own id, `CallSettings.payer`):
a hit on an entry another payer wrote, or one whose payer is unknown (``''``),
is also ``saved_calls=1`` (this run paid nothing for it), while a hit on the run's
own entry (a resumed run asking again what its interrupted invocation paid for)
is not. The scripted test double is never cached (its replies are not a function
of the request).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import sqlite3
import threading
from pathlib import Path

import msgspec

from redraft.backends.base import Backend, ChatRequest, Completion, PlainReplies

_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder = msgspec.msgpack.Decoder(Completion)
_TABLE = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, completion BLOB, payer TEXT)"


def cache_dir() -> Path:
    return Path(os.environ.get("REDRAFT_CACHE_DIR") or Path.home() / ".cache" / "redraft")


class ResponseCache:
    """A SQLite table of completions by request key; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=10.0, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        # Several actors on a node open the file at once (they start in parallel). Switching a new file
        # to WAL takes an exclusive lock, and SQLite answers "database is locked" to the losers at once
        # instead of waiting, so the processes take turns at the set-up, through a lock file beside it.
        with open(path.with_name(path.name + ".lock"), "a") as turn:
            fcntl.flock(turn, fcntl.LOCK_EX)  # released when the file closes
            self._db.execute("PRAGMA journal_mode=WAL")
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
            if columns and "payer" not in columns:  # a pre-release redraft's: its answers' payers are unknown
                self._db.execute("DROP TABLE responses")  # only a cache: made anew, its calls paid once more
            self._db.execute(_TABLE)

    @staticmethod
    def key(spec: str, request: ChatRequest) -> str:
        """The request's key: the caching hints (``stable_chars``, ``cache_key``) at their defaults, since they
        change what a call costs, never what it answers."""
        asked = msgspec.structs.replace(request, stable_chars=0, cache_key="")
        return hashlib.sha256(spec.encode() + b"\0" + _encoder.encode(asked)).hexdigest()

    def get(self, key: str) -> tuple[Completion, str] | None:
        """The completion stored under ``key`` and who paid for it ('' when unknown), or None."""
        with self._lock:
            row = self._db.execute("SELECT completion, payer FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else (_decoder.decode(row[0]), row[1] or "")

    def put(self, key: str, completion: Completion, payer: str = "") -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, completion, payer) VALUES (?, ?, ?)",
                (key, _encoder.encode(completion), payer or None),
            )


class CachedBackend:
    """Answers from the cache when it can, else from ``inner`` (and remembers the answer, paid by ``payer``)."""

    def __init__(self, inner: Backend, spec: str, cache: ResponseCache, payer: str = "") -> None:
        self._inner = inner
        self._spec = spec
        self._cache = cache
        self._payer = payer

    async def complete(self, request: ChatRequest) -> Completion:
        key = ResponseCache.key(self._spec, request)
        hit = await asyncio.to_thread(self._cache.get, key)
        if hit is not None:
            completion, payer = hit
            saved = not payer or payer != self._payer  # paid by another run, or by nobody known
            usage = msgspec.structs.replace(completion.usage, cache_hits=1, saved_calls=int(saved))
            return msgspec.structs.replace(completion, usage=usage)
        completion = await self._inner.complete(request)
        await asyncio.to_thread(self._cache.put, key, completion, self._payer)
        return completion


_OPEN: dict[Path, ResponseCache] = {}
_OPEN_LOCK = threading.Lock()


def cached(backend: Backend, spec: str, *, enabled: bool, payer: str = "") -> Backend:
    """``backend``, its replies made plain (`PlainReplies`: the client every role holds), behind this node's
    response cache unless disabled or a scripted double; the answers it pays for are recorded as ``payer``'s ('':
    nobody's, so every hit is saved)."""
    backend = PlainReplies(backend)  # before the cache: an entry is always text a frame can carry
    if not enabled or spec.startswith("scripted"):
        return backend
    path = cache_dir() / "responses.sqlite"
    with _OPEN_LOCK:
        if path not in _OPEN:
            _OPEN[path] = ResponseCache(path)
    return CachedBackend(backend, spec, _OPEN[path], payer)
