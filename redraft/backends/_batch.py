"""Rounds through the providers' batch APIs (``--batch``): half the price, answered within hours.

A refinement loop has many turns, but its rounds are synchronous across the tasks
in flight: they ask for their drafts at about the same time, then their critiques,
then their revisions. With ``--batch`` a role's calls to ``openai:`` or
``anthropic:`` do not go out one by one: each goes to its endpoint's
`BatchCollector` (one per endpoint and run, on the driver's node), which gathers
calls until none has come for `BatchSettings.gather_s` (or the oldest has waited
``max_gather_s``, or a batch is full), sends them as one provider batch
(`redraft.backends._batch_apis`), polls it (every ``first_poll_s``, growing to
``max_poll_s``), and answers each call when its batch has ended. Everything else is
the loop online: the same requests and seeds, the response cache, the retries.

See docs/architecture.md, section "Provider batches: resume, failures, stop, cost".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from redraft.backends._batch_apis import Answer, BatchAPI, LineFailure, batch_api
from redraft.backends._batch_journal import BatchJournal, BatchRun, left_open, metadata
from redraft.backends._retrying import RETRYABLE_STATUSES, with_retries
from redraft.backends.anthropic import AnthropicSpec
from redraft.backends.base import Backend, ChatRequest, Completion
from redraft.backends.cache import ResponseCache
from redraft.backends.openai import OpenAISpec
from redraft.errors import (
    AuthenticationError,
    BackendError,
    PermanentBackendError,
    RetryableBackendError,
)
from redraft.services import current

log = logging.getLogger(__name__)

MAX_WAITING = 100_000
"""Calls a collector holds open at once (its actor's concurrency)."""


class BatchSettings(msgspec.Struct, frozen=True, kw_only=True):
    wait_s: float = 86_400.0
    """A batch not ended after this long is cancelled, and its calls that got no answer are made online."""
    gather_s: float = 1.0
    max_gather_s: float = 30.0
    first_poll_s: float = 1.0
    max_poll_s: float = 60.0


@dataclass(frozen=True)
class BatchedSpec:
    """An ``openai:`` or ``anthropic:`` spec whose calls go through the run's batches."""

    inner: OpenAISpec | AnthropicSpec
    collector: str
    """The name its endpoint's `BatchCollector` is found by."""
    journal: str | None = None
    settings: BatchSettings = field(default_factory=BatchSettings)
    run: BatchRun | None = None

    @property
    def spec(self) -> str:
        return self.inner.spec

    def create(self) -> Backend:
        return BatchedBackend(self)


class BatchedBackend:
    """A role's client: each attempt of a call waits for its line's answer from the collector."""

    def __init__(self, spec: BatchedSpec) -> None:
        self._spec = spec
        self._services = current()
        self._collector = self._services.shared(
            BatchCollector,
            spec.collector,
            spec.inner,
            spec.journal,
            spec.settings,
            spec.run,
            per_node=False,
            num_cpus=0,
            max_concurrency=MAX_WAITING,
        )
        self._online = spec.inner.create()
        """For the calls a batch never ran."""

    async def complete(self, request: ChatRequest) -> Completion:
        return await with_retries(lambda: self._once(request), policy=self._spec.inner.retry, what=self._spec.spec)

    async def _once(self, request: ChatRequest) -> Completion:
        answer: Answer = await self._services.call(self._collector, "complete", request)
        if isinstance(answer, Completion):
            return answer
        if answer.kind == "unfinished":
            log.info("%s; made online", answer.message)
            return await self._online.complete(request)
        raise line_error(answer)


def line_error(failure: LineFailure) -> BackendError:
    """The error of an attempt whose batch line failed, by the online rules for its status."""
    status = failure.status
    if failure.kind == "cancelled" or status in RETRYABLE_STATUSES or status >= 500:
        return RetryableBackendError(failure.message, status=status or None)
    if status in (401, 403):
        return AuthenticationError(failure.message)
    return PermanentBackendError(failure.message)


@dataclass
class _Open:
    keys: list[str] | None
    """None for a batch found in the provider's list: known once its results are read."""
    submitted_at: float
    """Wall-clock seconds (the journal outlives the process)."""
    waiting: int = 0
    """Its answers not handed over yet; it is marked ended in the journal at 0."""
    owned: bool = True
    """This run's for sure: cancelled at a stop or past ``wait_s`` (not so a batch that may be another's)."""
    overdue: bool = False
    """Cancelled for running past ``wait_s``: its unfinished lines are made online."""
    ended: bool = False
    """Its results are in (some may wait to be asked for again)."""


class BatchCollector:
    """Gathers an endpoint's calls into provider batches and hands each its answer; an actor on a cluster."""

    def __init__(
        self,
        spec: OpenAISpec | AnthropicSpec,
        journal: str | None,
        settings: BatchSettings,
        run: BatchRun | None = None,
        *,
        api: BatchAPI | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._spec = spec
        self._api = api or batch_api(spec)
        self._journal = BatchJournal(Path(journal), spec.spec, run.uid if run else None) if journal else None
        self._run = run
        self._settings = settings
        self._clock, self._sleep = clock, sleep
        self._waiting: dict[str, asyncio.Future[Answer]] = {}
        self._pending: dict[str, ChatRequest] = {}
        self._open: dict[str, _Open] = {}
        self._sent: dict[str, str] = {}
        """Each key in an open batch: the batch's id."""
        self._early: dict[str, tuple[Answer, str]] = {}
        """Answers (and their batch) of a resumed batch whose calls were not asked again yet."""
        self._first = self._last = 0.0
        self._gathering: asyncio.Task[None] | None = None
        self._followers: set[asyncio.Task[None]] = set()
        self._resumed = False
        self._stopped = False
        """The run stopped (`cancel_open`): nothing more is sent."""

    async def resume(self) -> int:
        """Follow the batches an earlier invocation left open (`left_open`); how many."""
        if not self._resumed:
            self._resumed = True
            found = await left_open(self._journal, self._api, self._run, self._spec.spec)
            for left in found:
                self._open[left.batch_id] = _Open(
                    left.keys, left.submitted_at, waiting=len(left.keys or ()), owned=left.owned
                )
                self._sent.update(dict.fromkeys(left.keys or (), left.batch_id))
                self._follow(left.batch_id)
        return len(self._open)

    async def complete(self, request: ChatRequest) -> Answer:
        if self._stopped:
            return LineFailure("cancelled", f"{self._spec.spec}: the run stopped")
        await self.resume()
        key = ResponseCache.key(self._spec.spec, request)
        if key in self._early:
            answer, batch_id = self._early.pop(key)
            self._delivered(batch_id)
            return answer
        future = self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = asyncio.get_running_loop().create_future()
            if key not in self._sent:
                self._gather(key, request)
        return await asyncio.shield(future)

    async def cancel_open(self) -> int:
        """The run stops: cancel every batch still open at the provider (their finished lines stay readable for
        a resume, which follows them from the journal); how many. Calls still waiting, and any made from now
        on, get a cancelled line."""
        self._stopped = True
        for task in [*self._followers, *([self._gathering] if self._gathering else [])]:
            task.cancel()
        cancelled = [batch_id for batch_id, batch in self._open.items() if not batch.ended and batch.owned]
        for batch_id in cancelled:
            await self._cancel(batch_id)
        stopped = LineFailure("cancelled", f"{self._spec.spec}: the run stopped")
        for future in self._waiting.values():
            if not future.done():
                future.set_result(stopped)
        self._waiting.clear()
        self._pending.clear()
        return len(cancelled)

    async def _cancel(self, batch_id: str) -> None:
        try:
            await self._api.cancel(batch_id)
        except BackendError as exc:  # it ended meanwhile (409), or the provider is unreachable: followed as it is
            log.warning("%s: could not cancel batch %s: %s", self._spec.spec, batch_id, exc)

    # ------------------------------------------------------------ gathering and sending

    def _gather(self, key: str, request: ChatRequest) -> None:
        now = self._clock()
        if not self._pending:
            self._first = now
        self._pending[key] = request
        self._last = now
        if self._gathering is None or self._gathering.done():
            self._gathering = asyncio.create_task(self._send_when_quiet())

    async def _send_when_quiet(self) -> None:
        settings = self._settings
        while self._pending:
            wait = min(self._last + settings.gather_s, self._first + settings.max_gather_s) - self._clock()
            if (wait > 0 and len(self._pending) < self._api.max_lines) or self._holding():
                await self._sleep(max(wait, settings.gather_s))
                continue
            await self._send(self._take())

    def _holding(self) -> bool:
        """Whether a batch found in the provider's list, its keys unknown, has not ended (within ``wait_s``): a
        call it answers must not be sent again."""
        now = self._clock()
        return any(
            b.keys is None and not b.ended and now - b.submitted_at <= self._settings.wait_s
            for b in self._open.values()
        )

    def _take(self) -> dict[str, bytes]:
        """The lines of the next batch, oldest first, within the provider's limits."""
        lines: dict[str, bytes] = {}
        size = 0
        for key, request in list(self._pending.items()):
            line = self._api.line(key, request)
            if lines and (len(lines) >= self._api.max_lines or size + len(line) + 1 > self._api.max_bytes):
                break
            lines[key] = line
            size += len(line) + 1
            del self._pending[key]
        self._first = 0.0  # what is left has waited its turn: it goes next, at once
        return lines

    async def _send(self, lines: dict[str, bytes]) -> None:
        try:
            batch_id = await self._api.submit(list(lines.values()), metadata(self._run, self._spec.spec))
        except Exception as exc:  # not taken: each call fails as the request would have (and is retried so)
            failure = _failure(exc)
            for key in lines:
                self._hand_over(key, failure)
            return
        submitted_at = self._clock()
        self._open[batch_id] = _Open(list(lines), submitted_at, waiting=len(lines))
        self._sent.update(dict.fromkeys(lines, batch_id))
        if self._journal is not None:
            self._journal.submitted(batch_id, list(lines), submitted_at)
        log.info("%s: batch %s sent with %d calls", self._spec.spec, batch_id, len(lines))
        self._follow(batch_id)

    # ------------------------------------------------------------ following a batch to its end

    def _follow(self, batch_id: str) -> None:
        task = asyncio.create_task(self._until_ended(batch_id))
        self._followers.add(task)
        task.add_done_callback(self._followers.discard)

    async def _until_ended(self, batch_id: str) -> None:
        batch = self._open[batch_id]
        delay = self._settings.first_poll_s
        while True:
            try:
                if await self._api.ended(batch_id):
                    answers = await self._api.results(batch_id, batch.submitted_at)
                    break
                if batch.owned and not batch.overdue and self._clock() - batch.submitted_at > self._settings.wait_s:
                    log.warning(
                        "%s: batch %s not ended after %gs: cancelled; its unanswered calls are made online",
                        self._spec.spec,
                        batch_id,
                        self._settings.wait_s,
                    )
                    batch.overdue = True
                    await self._cancel(batch_id)
            except RetryableBackendError as exc:  # the provider is briefly unreachable: ask again later
                log.warning("%s: polling batch %s: %s", self._spec.spec, batch_id, exc)
            except Exception as exc:  # it does not know the batch (404), or its results do not read: sent again
                log.warning("%s: batch %s is lost (%r); its calls are sent again", self._spec.spec, batch_id, exc)
                answers = {"*": LineFailure("status", f"{self._spec.spec}: batch {batch_id} is lost: {exc}", 503)}
                break
            await self._sleep(delay)
            delay = min(delay * 1.5, self._settings.max_poll_s)
        self._close(batch_id, answers)

    def _close(self, batch_id: str, answers: dict[str, Answer]) -> None:
        batch = self._open[batch_id]
        batch.ended = True
        everything = answers.get("*")
        if batch.keys is None:
            self._found(batch_id, batch, [] if everything else [k for k in answers if k != "*"])
        for key in batch.keys or ():
            answer = everything or answers.get(key) or LineFailure("unfinished", f"no answer in batch {batch_id}")
            if batch.overdue and isinstance(answer, LineFailure) and answer.kind == "cancelled":
                answer = msgspec.structs.replace(answer, kind="unfinished")
            if self._sent.get(key) == batch_id:
                del self._sent[key]
            self._hand_over(key, answer, batch_id)

    def _found(self, batch_id: str, batch: _Open, keys: list[str]) -> None:
        """A batch found in the provider's list has ended: its keys are its custom ids. A call gathered meanwhile
        is answered from it rather than sent, and the journal records it, so a later resume follows it."""
        batch.keys, batch.waiting = keys, len(keys)
        for key in keys:
            self._pending.pop(key, None)
        if not keys:
            del self._open[batch_id]
            return
        log.info("%s: batch %s, found in the provider's list, answers %d calls", self._spec.spec, batch_id, len(keys))
        if self._journal is not None:
            self._journal.submitted(batch_id, keys, batch.submitted_at)

    def _hand_over(self, key: str, answer: Answer, batch_id: str | None = None) -> None:
        if isinstance(answer, Completion):
            answer = msgspec.structs.replace(answer, usage=msgspec.structs.replace(answer.usage, batch_calls=1))
        future = self._waiting.pop(key, None)
        if future is not None and not future.done():
            future.set_result(answer)
            if batch_id is not None:
                self._delivered(batch_id)
        elif batch_id is not None:  # a resumed batch answered before its call was asked again
            self._early[key] = (answer, batch_id)

    def _delivered(self, batch_id: str) -> None:
        batch = self._open[batch_id]
        batch.waiting -= 1
        if batch.waiting <= 0:
            del self._open[batch_id]
            if self._journal is not None:
                self._journal.ended(batch_id)


def _failure(exc: Exception) -> LineFailure:
    """A batch the provider would not take: each of its calls failed as the request did."""
    if isinstance(exc, RetryableBackendError):
        return LineFailure("status", str(exc), exc.status or 503)
    if isinstance(exc, BackendError):
        return LineFailure("status", str(exc), 401 if isinstance(exc, AuthenticationError) else 400)
    return LineFailure("status", f"the batch could not be sent: {exc!r}", 500)
