"""Seeded service logs of one incident each, and what a reader of a log can see in it.

The facts an incident summary must get right (`Incident.gold`): the minute of the first ERROR
line, the minute of the recovery line, the failed requests, the root-cause service and its error
code. `read_log` is what the feedback may take from a log: its services, its error codes and the
minutes at which it has a line; which of them matter is the gold's.

Invariants: a case depends only on (seed, difficulty); the first ERROR line is the root cause's
and carries its code; exactly one line says ``recovered``; an error code is a word of capitals
and digits joined by underscores, or ``E`` and three digits (`CODE`), and no other word of a log
has that shape; every line is before midnight.

See docs/architecture.md, section "The incident logs".
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

SERVICES = ("api-gateway", "auth", "checkout", "inventory", "notifications", "payments", "search")
CALLERS: dict[str, tuple[str, ...]] = {
    "auth": ("api-gateway", "checkout"),
    "checkout": ("api-gateway",),
    "inventory": ("checkout", "search"),
    "payments": ("checkout",),
    "search": ("api-gateway",),
}
"""The services a root cause can be, and the services that call it (where its knock-on errors show)."""
ROOT_ERRORS = {
    "DB_TIMEOUT": "query to the primary database timed out after 5000 ms",
    "POOL_EXHAUSTED": "no free connection left in the database pool",
    "CONN_REFUSED": "connection to the cache cluster refused",
    "OOM_KILLED": "worker restarted after running out of memory",
    "E503": "request rejected: every worker is busy",
    "E500": "unhandled exception in the request handler",
    "TLS_HANDSHAKE": "handshake with the upstream provider failed",
    "DEADLOCK_DETECTED": "transaction aborted by the database",
}
KNOCK_ON_CODES = ("E502", "UPSTREAM_TIMEOUT")
WARNINGS = {
    "SLOW_QUERY": "report query took 2.4 s",
    "DISK_USAGE_HIGH": "data volume at 86% of its size",
    "CERT_EXPIRING": "certificate expires in 12 days",
    "E429": "one client is over its rate limit",
}
FIXES = (
    "feature flag for the new release path turned off",
    "database pool raised from 50 to 200 connections",
    "cache client timeout raised to 2 s",
)
NOISE = (
    ("api-gateway", "GET /health 200 in {small} ms"),
    ("auth", "token cache hit rate {pct}%"),
    ("checkout", "{count} carts saved"),
    ("inventory", "stock sync done: {count} items"),
    ("notifications", "{count} emails sent"),
    ("payments", "settlement batch {small} queued"),
    ("search", "index refresh done: {count} documents"),
)
MIN_LINES, MAX_LINES = 25, 60
CODE = re.compile(r"(?<![\w-])(?:E\d{3}|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w-])")
"""An error code: ``E503``, ``DB_TIMEOUT``."""
LINE = re.compile(r"^(\d{2}):(\d{2}):\d{2} (?:INFO|WARN|ERROR) (\S+) ")


@dataclass(frozen=True)
class Incident:
    """One seeded incident: its log, the facts a summary must get right, and the times of its key events."""

    lines: tuple[str, ...]
    service: str
    """The root-cause service."""
    code: str
    """The root cause's error code."""
    version: str
    """The version whose deploy caused it."""
    deployed: str
    """HH:MM of that deploy."""
    start: str
    """HH:MM of the first ERROR line."""
    fixed: str
    """HH:MM of the rollback or the fix."""
    end: str
    """HH:MM of the recovery line."""
    failed_requests: int
    difficulty: int

    def gold(self) -> dict[str, Any]:
        """The held-out facts, as a task's ``gold`` holds them."""
        facts = {"start": self.start, "end": self.end, "failed_requests": self.failed_requests}
        return facts | {"service": self.service, "code": self.code, "difficulty": self.difficulty}


class LogView(NamedTuple):
    """What a reader of a log can see in it, with no idea of which of it matters."""

    services: frozenset[str]
    codes: frozenset[str]
    minutes: frozenset[str]
    """Every HH:MM at which the log has a line."""


def read_log(lines: Iterable[object]) -> LogView:
    """The services, the error codes and the minutes of a log's lines (lines of another shape are skipped)."""
    services: set[str] = set()
    codes: set[str] = set()
    minutes: set[str] = set()
    for line in lines:
        found = LINE.match(str(line))
        if found is None:
            continue
        minutes.add(f"{found.group(1)}:{found.group(2)}")
        services.add(found.group(3))
        codes.update(CODE.findall(str(line)[found.end() :]))
    return LogView(frozenset(services), frozenset(codes), frozenset(minutes))


def case_seed(seed: int, index: int) -> int:
    """The seed of task ``index`` of a run seeded ``seed``: each case is drawn on its own."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest(), "big")


def clock(seconds: int) -> str:
    """``HH:MM:SS`` of a second of the day."""
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def minute(seconds: int) -> str:
    """``HH:MM`` of a second of the day."""
    return clock(seconds)[:5]


class _Log:
    """Lines being written, each at its second; `lines` sorts them, earlier-written first on a tie."""

    def __init__(self) -> None:
        self._entries: list[tuple[int, int, str]] = []

    def add(self, at: int, level: str, service: str, message: str) -> None:
        self._entries.append((at, len(self._entries), f"{clock(at)} {level} {service} {message}"))

    def __len__(self) -> int:
        return len(self._entries)

    def lines(self) -> tuple[str, ...]:
        return tuple(text for _, _, text in sorted(self._entries))


class _Times(NamedTuple):
    begin: int
    deploy: int
    start: int
    fix: int
    recovery: int
    close: int


def _times(rng: random.Random, per_minute: bool) -> _Times:
    begin = rng.randint(0, 20) * 3600 + rng.randint(0, 3599)
    deploy = begin + rng.randint(300, 900)
    start = deploy + rng.randint(60, 420)
    fix = start + (rng.randint(180, 480) if per_minute else rng.randint(300, 1500))
    recovery = fix + rng.randint(60, 240)
    return _Times(begin, deploy, start, fix, recovery, recovery + rng.randint(150, 480))


def _version(rng: random.Random) -> tuple[str, str]:
    """A new version and the one before it."""
    major, minor, patch = rng.randint(1, 4), rng.randint(0, 30), rng.randint(1, 9)
    return f"v{major}.{minor}.{patch}", f"v{major}.{minor}.{patch - 1}"


def _incident_lines(rng: random.Random, log: _Log, times: _Times, root: str, code: str) -> tuple[str, str]:
    """The deploy, the errors, the rollback or fix and the recovery; returns (the version, the previous one)."""
    version, previous = _version(rng)
    log.add(times.deploy, "INFO", root, f"deploy {version} started")
    log.add(times.deploy + rng.randint(20, 50), "INFO", root, f"deploy {version} finished")
    log.add(times.start, "ERROR", root, f"{code} {ROOT_ERRORS[code]}")
    for _ in range(rng.randint(2, 7)):
        log.add(rng.randint(times.start + 5, times.fix - 1), "ERROR", root, f"{code} {ROOT_ERRORS[code]}")
    for caller in CALLERS[root]:
        for _ in range(rng.randint(1, 3)):
            knock = rng.choice(KNOCK_ON_CODES)
            log.add(rng.randint(times.start + 5, times.fix - 1), "ERROR", caller, f"{knock} call to {root} failed")
    log.add(times.start + rng.randint(90, 150), "WARN", "api-gateway", "5xx rate above 5% for 2 minutes")
    if rng.random() < 0.5:
        log.add(times.fix, "INFO", root, f"rollback to {previous} started")
        log.add(times.fix + rng.randint(20, 50), "INFO", root, f"rollback to {previous} finished")
    else:
        log.add(times.fix, "INFO", root, f"fix applied: {rng.choice(FIXES)}")
    log.add(times.recovery, "INFO", "api-gateway", "recovered: error rate back to baseline")
    return version, previous


def _failed_requests(rng: random.Random, log: _Log, times: _Times, per_minute: bool) -> int:
    """The api-gateway's report of failed requests: one count a minute of the incident, or one total."""
    if not per_minute:
        total = rng.randint(40, 2400)
        at = times.recovery + rng.randint(30, 90)
        log.add(at, "INFO", "api-gateway", f"incident closed: failed_requests={total} in total")
        return total
    counts = []
    for at in range((times.start // 60 + 1) * 60, (times.recovery // 60 + 2) * 60, 60):
        counts.append(rng.randint(3, 90))
        log.add(at, "WARN", "api-gateway", f"failed_requests={counts[-1]} in the last minute")
    return sum(counts)


def _distractors(rng: random.Random, log: _Log, times: _Times, root: str, version: str, count: int) -> None:
    """``count`` lines of trouble that did not cause the incident: a WARN elsewhere, then a healthy deploy."""
    outside = [s for s in SERVICES if s not in {root, "api-gateway", *CALLERS[root]}]
    if count >= 1:
        code = rng.choice(sorted(WARNINGS))
        log.add(rng.randint(times.begin, times.close), "WARN", rng.choice(outside), f"{code} {WARNINGS[code]}")
    if count >= 2:
        other = rng.choice([s for s in SERVICES if s != root])
        other_version = version
        while other_version == version:
            other_version = _version(rng)[0]
        at = rng.randint(times.begin, times.start - 120)
        log.add(at, "INFO", other, f"deploy {other_version} started")
        log.add(at + rng.randint(20, 50), "INFO", other, f"deploy {other_version} finished")
        log.add(at + rng.randint(60, 110), "INFO", other, "health checks passing")


def _noise(rng: random.Random, log: _Log, times: _Times, lines: int) -> None:
    for _ in range(lines):
        service, template = rng.choice(NOISE)
        message = template.format(small=rng.randint(2, 40), pct=rng.randint(90, 99), count=rng.randint(10, 2000))
        log.add(rng.randint(times.begin, times.close), "INFO", service, message)


def make_incident(seed: int, difficulty: int) -> Incident:
    """The incident of ``seed`` at ``difficulty`` (1 to 3: 0, 1 or 2 distractors)."""
    rng = random.Random(seed)
    root, code = rng.choice(sorted(CALLERS)), rng.choice(sorted(ROOT_ERRORS))
    per_minute = rng.random() < 0.5
    times, log = _times(rng, per_minute), _Log()
    version, _ = _incident_lines(rng, log, times, root, code)
    failed = _failed_requests(rng, log, times, per_minute)
    _distractors(rng, log, times, root, version, difficulty - 1)
    _noise(rng, log, times, max(rng.randint(MIN_LINES, MAX_LINES) - len(log), 4))
    return Incident(
        lines=log.lines(),
        service=root,
        code=code,
        version=version,
        deployed=minute(times.deploy),
        start=minute(times.start),
        fixed=minute(times.fix),
        end=minute(times.recovery),
        failed_requests=failed,
        difficulty=difficulty,
    )
