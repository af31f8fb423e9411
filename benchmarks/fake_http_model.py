"""A fake OpenAI-compatible model server for load benchmarks: asyncio, keep-alive, a fixed latency per request.

It runs in a process of its own (`serve_in_background`), so the client under test
does not share its interpreter. Every ``POST /v1/chat/completions`` waits
``latency_s`` and answers ``Answer: 7`` (a critique request, one with
``response_format``, gets an empty critique); ``GET /stats`` tells how many model
requests it answered and when the first and last arrived (wall clock), and
``POST /reset`` zeroes that.

With ``limit=(N, W)`` it enforces a provider's rate limit: at most N model
requests answered in any W seconds; the rest get a 429 whose ``Retry-After`` (and
``retry-after-ms``) says when the oldest answered request leaves the window, and
are counted as ``refused`` in the stats.

A request whose messages ask for DSPy's chat format (they name the end marker
``[[ ## completed ## ]]``) is answered in that format, as a model following the
prompt would: each output field the system message lists gets a ``[[ ## name ## ]]``
section (``7`` for plain fields, ``{}`` or ``[]`` for dict and list fields, and for
a ``dict`` field next to a ``module_names`` input one short piece of advice per
module named), then the end marker. Nothing else asks for it, so every other client
gets the answers above unchanged. It exists for ``bench_peers.py``: DSPy's
adapter cannot parse ``Answer: 7``, and Refine's feedback call needs fields of
its own. Standard library only: the load is the client's, not
the server's (a threaded server with a small backlog measures itself instead).
"""

from __future__ import annotations

import asyncio
import collections
import json
import multiprocessing
import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DRAFT_TEXT = "Answer: 7"
CRITIQUE_TEXT = '{"issues": []}'
DSPY_END = "[[ ## completed ## ]]"
_DSPY_OUTPUT_FIELD = re.compile(r"^\d+\. `(\w+)` \(([^)]*)\)", re.MULTILINE)
_DSPY_MODULE_NAMES = re.compile(r"\[\[ ## module_names ## \]\]\n(\[.*?\])", re.DOTALL)


class _Stats:
    def __init__(self, limit: tuple[int, float] | None = None) -> None:
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.refused = 0
        self.limit = limit
        self.window: collections.deque[float] = collections.deque()

    def refuse_for(self, now: float) -> float | None:
        """None if a request arriving ``now`` is within the limit (and counted in), else seconds to wait."""
        if self.limit is None:
            return None
        requests, window_s = self.limit
        while self.window and self.window[0] <= now - window_s:
            self.window.popleft()
        if len(self.window) >= requests:
            self.refused += 1
            return self.window[0] + window_s - now
        self.window.append(now)
        return None


def _dspy_answer(system: str, user: str) -> str:
    """The answer in DSPy's chat format to the output fields ``system`` lists (after "Your output fields are")."""
    _, _, outputs = system.partition("Your output fields are:")
    names = _DSPY_MODULE_NAMES.search(user)
    sections = []
    for name, kind in _DSPY_OUTPUT_FIELD.findall(outputs.split("All interactions", 1)[0]):
        if kind.startswith("dict"):
            modules = json.loads(names.group(1)) if names else []
            value = json.dumps({m: "Write each step as an equation before the answer." for m in modules})
        else:
            value = "[]" if kind.startswith("list") else "7"
        sections.append(f"[[ ## {name} ## ]]\n{value}")
    return "\n\n".join([*sections, DSPY_END])


def _completion(body: dict[str, Any]) -> bytes:
    messages = body.get("messages") or [{}]
    contents = [m.get("content") if isinstance(m.get("content"), str) else "" for m in messages]
    if any(DSPY_END in c for c in contents):
        text = _dspy_answer(contents[0], contents[-1])
    else:
        text = CRITIQUE_TEXT if "response_format" in body else DRAFT_TEXT
    return json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
    ).encode()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return method, path, body


async def _serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stats: _Stats, latency_s: float
) -> None:
    try:
        while True:
            try:
                request = await _read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if request is None:
                return
            _method, path, body = request
            status = b"200 OK"
            headers = b""
            if path.endswith("/chat/completions") and (wait := stats.refuse_for(time.monotonic())) is not None:
                status = b"429 Too Many Requests"
                headers = f"Retry-After: {wait:.3f}\r\nretry-after-ms: {wait * 1000:.0f}\r\n".encode()
                payload = json.dumps({"error": {"message": "rate limit reached", "type": "requests"}}).encode()
            elif path.endswith("/chat/completions"):
                stats.count += 1
                stats.last = time.time()
                stats.first = stats.first or stats.last
                await asyncio.sleep(latency_s)
                payload = _completion(json.loads(body))
            elif path == "/reset":
                stats.count, stats.first, stats.last, stats.refused = 0, 0.0, 0.0, 0
                stats.window.clear()
                payload = b"{}"
            else:
                payload = json.dumps(
                    {"count": stats.count, "first": stats.first, "last": stats.last, "refused": stats.refused}
                ).encode()
            writer.write(
                b"HTTP/1.1 "
                + status
                + b"\r\nContent-Type: application/json\r\n"
                + headers
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
    finally:
        writer.close()


def _serve(sock: socket.socket, latency_s: float, limit: tuple[int, float] | None = None) -> None:
    stats = _Stats(limit)

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _serve_connection(r, w, stats, latency_s), sock=sock, backlog=4096
        )
        async with server:
            await server.serve_forever()

    asyncio.run(main())


@contextmanager
def serve_in_background(latency_s: float = 0.2, limit: tuple[int, float] | None = None) -> Iterator[tuple[str, int]]:
    """Start the server in a child process; yield its base URL (``http://127.0.0.1:PORT``) and its pid. ``limit``:
    (N, W), at most N model requests answered in any W seconds, 429 for the rest."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    process = multiprocessing.get_context("fork").Process(target=_serve, args=(sock, latency_s, limit), daemon=True)
    process.start()
    try:
        assert process.pid is not None
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", process.pid
    finally:
        process.terminate()
        process.join()
        sock.close()


def stats(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/stats") as reply:
        result: dict[str, float] = json.loads(reply.read())
        return result


def reset(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{url}/reset", data=b"{}", method="POST")).read()
