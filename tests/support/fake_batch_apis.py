"""The batch APIs of `FakeLLMServer` (tests/support/fake_llm_servers.py): OpenAI's and Anthropic's wire formats.

OpenAI (Files + Batches): ``POST /v1/files`` (a multipart upload of a JSONL input file), ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content``, ``POST /v1/batches`` (its ``metadata`` kept and shown), ``GET /v1/batches``
(newest first, ``limit`` and the ``after`` cursor), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.
Anthropic (Message Batches): ``POST /v1/messages/batches`` (no metadata: the provider keeps none),
``GET /v1/messages/batches`` (newest first, ``limit``, ``after_id`` and ``before_id``),
``GET /v1/messages/batches/{id}``, ``GET /v1/messages/batches/{id}/results`` (JSONL) and
``POST /v1/messages/batches/{id}/cancel``.

A batch is in progress for the server's `batch_delay_s` after its creation (for ever while `batch_hold` is set),
then the first request that looks at it finds it done: every line answered at once, with exactly what the online
endpoint answers for its body (`openai_reply` / `anthropic_reply`), unless `batch_fail` gives it a status. A
cancel makes the batch cancelling; the next look finds it cancelled (OpenAI) or ended (Anthropic), and since
lines are answered only when their whole batch is, every line of a cancelled batch is a cancelled one.
"""

from __future__ import annotations

import email.policy
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.parser import BytesParser
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from tests.support.fake_llm_servers import FakeLLMServer

Provider = Literal["openai", "anthropic"]

CHAT_ENDPOINT = "/v1/chat/completions"
DAY_S = 24 * 3600
_ROOTS = ("/v1/files", "/v1/batches", "/v1/messages/batches")
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # Anthropic's pattern; OpenAI takes any string


@dataclass
class SeenBatch:
    """One batch as the server received it."""

    provider: Provider
    id: str
    custom_ids: list[str]
    """In the order of the batch's lines."""
    cancelled: bool = False
    """Its cancel was accepted (while it was still in progress)."""
    metadata: dict[str, str] | None = None
    """What it was created with (OpenAI; Anthropic's batches take none)."""


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }


Outcome = tuple[str, int, Any]
"""(custom_id, status, answer) of one line: 200 and the reply body; an error status and its message; 0 (and None)
when it was cancelled."""


@dataclass
class _Batch:
    seen: SeenBatch
    lines: list[tuple[str, dict[str, Any]]]
    """(custom_id, request body) of each line."""
    due: float
    """`time.monotonic()` from when it is done."""
    request: dict[str, Any] = field(default_factory=dict)
    """OpenAI: the create request (input_file_id, endpoint, completion_window, metadata)."""
    created_at: float = field(default_factory=time.time)
    cancel_at: float | None = None
    ended_at: float | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI: why its input file was refused (the batch then `failed`)."""
    output_file_id: str | None = None
    error_file_id: str | None = None

    def count(self, ok: bool) -> int:
        return sum((status == 200) == ok for _, status, _ in self.outcomes)


class Refusal(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def serves(path: str) -> bool:
    """Whether ``path`` is one of the batch APIs' (theirs to answer, with a 404 if no route matches)."""
    route = urlsplit(path).path
    return any(route == root or route.startswith(root + "/") for root in _ROOTS)


def anthropic_error_type(status: int) -> str:
    """The ``error.type`` of an errored batch line."""
    if status == 529:
        return "overloaded_error"
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(path: str, status: int, message: str) -> dict[str, Any]:
    """The body of an error answer to a batch API's request, in its provider's format."""
    if urlsplit(path).path.startswith("/v1/messages"):
        kinds = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}
        kind = kinds.get(status) or anthropic_error_type(status)
        return {"type": "error", "error": {"type": kind, "message": message}}
    return _openai_error(status, message)


def _openai_error(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def _rfc3339(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _unix(t: float | None) -> int | None:
    return None if t is None else int(t)


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError as e:
        raise Refusal(400, f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise Refusal(400, "the body must be a JSON object")
    return body


def _form(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, content)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not isinstance(message, EmailMessage) or message.get_content_type() != "multipart/form-data":
        raise Refusal(400, "expected a multipart/form-data body")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        assert isinstance(part, EmailMessage)
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = (part.get_filename(), payload)
    return fields


class BatchAPIs:
    """The files and batches of one `FakeLLMServer`, and the answers to its batch APIs' requests."""

    def __init__(self, fake: FakeLLMServer) -> None:
        self._fake = fake
        self._files: dict[str, _File] = {}
        self._batches: dict[str, _Batch] = {}
        # Serialises the batches' states. Held while a batch is answered (user callbacks: `reply_for`,
        # `batch_fail`), so never the server's own lock, which only guards its records (taken inside this one).
        self._lock = threading.Lock()

    def answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, bytes, str]:
        """(status, body, content type) of the answer to one request to a path that `serves`."""
        where = urlsplit(path)
        parts = where.path.strip("/").split("/")[1:]  # without "v1"
        query = {name: values[-1] for name, values in parse_qs(where.query).items()}
        try:
            with self._lock:
                return self._route(method, parts, headers, raw, query)
        except Refusal as e:
            return e.status, json.dumps(error_body(path, e.status, e.message)).encode(), "application/json"

    def _route(
        self, method: str, parts: list[str], headers: dict[str, str], raw: bytes, query: dict[str, str]
    ) -> tuple[int, bytes, str]:
        match method, parts:
            case "POST", ["files"]:
                return self._ok(self._upload(headers.get("content-type", ""), raw).json())
            case "GET", ["files", file_id]:
                return self._ok(self._file(file_id).json())
            case "GET", ["files", file_id, "content"]:
                return 200, self._file(file_id).content, "application/octet-stream"
            case "POST", ["batches"]:
                return self._ok(self._openai_json(self._openai_create(_json_object(raw))))
            case "GET", ["batches"]:
                page, more = self._listed("openai", query, 100)
                return self._ok(_page([self._openai_json(b) for b in page], more) | {"object": "list"})
            case "GET", ["messages", "batches"]:
                page, more = self._listed("anthropic", query, 1000)
                return self._ok(_page([self._anthropic_json(b) for b in page], more))
            case "GET", ["batches", batch_id]:
                return self._ok(self._openai_json(self._batch("openai", batch_id)))
            case "POST", ["batches", batch_id, "cancel"]:
                return self._ok(self._openai_json(self._cancel("openai", batch_id)))
            case "POST", ["messages", "batches"]:
                return self._ok(self._anthropic_json(self._anthropic_create(_json_object(raw))))
            case "GET", ["messages", "batches", batch_id]:
                return self._ok(self._anthropic_json(self._batch("anthropic", batch_id)))
            case "GET", ["messages", "batches", batch_id, "results"]:
                return 200, self._anthropic_results(self._batch("anthropic", batch_id)), "application/binary"
            case "POST", ["messages", "batches", batch_id, "cancel"]:
                return self._ok(self._anthropic_json(self._cancel("anthropic", batch_id)))
        raise Refusal(404, f"no route {method} /v1/{'/'.join(parts)}")

    @staticmethod
    def _ok(body: dict[str, Any]) -> tuple[int, bytes, str]:
        return 200, json.dumps(body).encode(), "application/json"

    # ---------------------------------------------------------------- state

    def _file(self, file_id: str) -> _File:
        if file_id not in self._files:
            raise Refusal(404, f"No such File object: {file_id}")
        return self._files[file_id]

    def _store(self, filename: str, purpose: str, content: bytes) -> _File:
        stored = _File(_new_id("file-"), filename, purpose, content)
        self._files[stored.id] = stored
        return stored

    def _batch(self, provider: Provider, batch_id: str) -> _Batch:
        batch = self._batches.get(batch_id)
        if batch is None or batch.seen.provider != provider:
            raise Refusal(404, f"No batch found with id '{batch_id}'")
        self._advance(batch)
        return batch

    def _listed(self, provider: Provider, query: dict[str, str], most: int) -> tuple[list[_Batch], bool]:
        """One page of the provider's batches, newest first, from its cursor (``after``/``after_id``, or
        Anthropic's ``before_id``); and whether more follow."""
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            raise Refusal(400, "limit: an integer is required") from None
        if not 1 <= limit <= most:
            raise Refusal(400, f"limit: must be between 1 and {most}")
        batches = [b for b in reversed(self._batches.values()) if b.seen.provider == provider]
        ids = [b.seen.id for b in batches]
        after, before = query.get("after") or query.get("after_id"), query.get("before_id")
        if before is not None:
            end = ids.index(before) if before in ids else 0
            page, more = batches[max(0, end - limit) : end], end - limit > 0
        else:
            start = (ids.index(after) + 1 if after in ids else len(ids)) if after is not None else 0
            page, more = batches[start : start + limit], len(batches) > start + limit
        for batch in page:
            self._advance(batch)
        return page, more

    def _add(self, provider: Provider, prefix: str, lines: list[tuple[str, dict[str, Any]]]) -> _Batch:
        seen = SeenBatch(provider, _new_id(prefix), [custom_id for custom_id, _ in lines])
        batch = _Batch(seen, lines, due=time.monotonic() + self._fake.batch_delay_s)
        self._batches[seen.id] = batch
        with self._fake._lock:
            self._fake.batches.append(seen)
        return batch

    def _advance(self, batch: _Batch) -> None:
        """End the batch if it is due (answering its lines) or its cancel was asked for by an earlier request."""
        if batch.ended_at is not None:
            return
        if batch.cancel_at is not None:
            outcomes: list[Outcome] = [(custom_id, 0, None) for custom_id, _ in batch.lines]
        elif not self._fake.batch_hold and time.monotonic() >= batch.due:
            outcomes = [self._run_line(batch.seen.provider, custom_id, body) for custom_id, body in batch.lines]
        else:
            return
        batch.outcomes, batch.ended_at = outcomes, time.time()
        if batch.seen.provider == "openai":
            self._write_openai_files(batch)

    def _run_line(self, provider: Provider, custom_id: str, body: dict[str, Any]) -> Outcome:
        fake = self._fake
        status = fake.batch_fail(custom_id, body) if fake.batch_fail is not None else None
        if status is not None:
            return custom_id, status, f"the fake server failed request {custom_id} with {status}"
        if provider == "openai" and fake.reject_response_format and "response_format" in body:
            return custom_id, 400, "response_format is not supported by this server"
        reply = fake.openai_reply(body) if provider == "openai" else fake.anthropic_reply(body)
        with fake._lock:
            fake.batch_lines_answered += 1
        return custom_id, 200, reply

    def _cancel(self, provider: Provider, batch_id: str) -> _Batch:
        batch = self._batch(provider, batch_id)  # advanced: it may have ended just now
        if batch.ended_at is not None:
            state = self._openai_status(batch) if provider == "openai" else "ended"
            raise Refusal(409, f"Cannot cancel a batch with status '{state}'.")
        if batch.cancel_at is None:
            batch.cancel_at = time.time()
            with self._fake._lock:
                batch.seen.cancelled = True
        return batch

    # ---------------------------------------------------------------- OpenAI

    def _upload(self, content_type: str, raw: bytes) -> _File:
        fields = _form(content_type, raw)
        if "file" not in fields or fields["file"][0] is None:
            raise Refusal(400, "'file' is a required property")
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if purpose != "batch":
            raise Refusal(400, f"Invalid value for 'purpose': {purpose!r} (this fake takes 'batch' only)")
        filename, content = fields["file"]
        return self._store(filename or "upload.jsonl", purpose, content)

    def _openai_create(self, body: dict[str, Any]) -> _Batch:
        endpoint, window = body.get("endpoint"), body.get("completion_window")
        if endpoint != CHAT_ENDPOINT:
            raise Refusal(400, f"Invalid value for 'endpoint': {endpoint!r} (this fake serves {CHAT_ENDPOINT})")
        if window != "24h":
            raise Refusal(400, f"Invalid value for 'completion_window': {window!r}")
        source = self._file(str(body.get("input_file_id")))
        if source.purpose != "batch":
            raise Refusal(400, f"File {source.id} has purpose {source.purpose!r}, not 'batch'")
        lines, errors = _openai_lines(source.content)
        metadata = body.get("metadata")
        if metadata is not None and (
            not isinstance(metadata, dict)
            or len(metadata) > 16
            or not all(isinstance(v, str) for v in metadata.values())
        ):
            raise Refusal(400, "metadata: at most 16 pairs of strings")
        batch = self._add("openai", "batch_", [] if errors else lines)
        batch.request, batch.errors = body, errors
        with self._fake._lock:
            batch.seen.metadata = metadata
        if errors:
            batch.ended_at = batch.created_at
        return batch

    def _write_openai_files(self, batch: _Batch) -> None:
        out: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for custom_id, status, answer in batch.outcomes:
            row: dict[str, Any] = {"id": _new_id("batch_req_"), "custom_id": custom_id, "response": None, "error": None}
            if status == 0:
                row["error"] = {"code": "batch_cancelled", "message": "The batch was cancelled before this line ran."}
            else:
                body = answer if status == 200 else _openai_error(status, answer)
                row["response"] = {"status_code": status, "request_id": _new_id("req_"), "body": body}
            (out if status == 200 else failed).append(row)
        if out:
            batch.output_file_id = self._store(f"{batch.seen.id}_output.jsonl", "batch_output", _jsonl(out)).id
        if failed:
            batch.error_file_id = self._store(f"{batch.seen.id}_error.jsonl", "batch_output", _jsonl(failed)).id

    @staticmethod
    def _openai_status(batch: _Batch) -> str:
        if batch.errors:
            return "failed"
        if batch.ended_at is not None:
            return "cancelled" if batch.cancel_at is not None else "completed"
        return "cancelling" if batch.cancel_at is not None else "in_progress"

    def _openai_json(self, batch: _Batch) -> dict[str, Any]:
        status, ended = self._openai_status(batch), _unix(batch.ended_at)
        return {
            "id": batch.seen.id,
            "object": "batch",
            "endpoint": batch.request.get("endpoint"),
            "input_file_id": batch.request.get("input_file_id"),
            "completion_window": batch.request.get("completion_window"),
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": _unix(batch.created_at),
            "in_progress_at": None if batch.errors else _unix(batch.created_at),
            "finalizing_at": ended if status == "completed" else None,
            "completed_at": ended if status == "completed" else None,
            "failed_at": ended if status == "failed" else None,
            "cancelling_at": _unix(batch.cancel_at),
            "cancelled_at": ended if status == "cancelled" else None,
            "expires_at": _unix(batch.created_at + DAY_S),
            "expired_at": None,
            "request_counts": {
                "total": len(batch.lines),
                "completed": batch.count(ok=True),
                "failed": batch.count(ok=False),
            },
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "metadata": batch.request.get("metadata"),
        }

    # ---------------------------------------------------------------- Anthropic

    def _anthropic_create(self, body: dict[str, Any]) -> _Batch:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise Refusal(400, "requests: a non-empty list is required")
        lines: list[tuple[str, dict[str, Any]]] = []
        for i, request in enumerate(requests):
            custom_id = request.get("custom_id") if isinstance(request, dict) else None
            params = request.get("params") if isinstance(request, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
                raise Refusal(400, f"requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$")
            if not isinstance(params, dict) or not {"model", "max_tokens", "messages"} <= params.keys():
                raise Refusal(400, f"requests.{i}.params: model, max_tokens and messages are required")
            lines.append((custom_id, params))
        if len({custom_id for custom_id, _ in lines}) < len(lines):
            raise Refusal(400, "requests: custom_id values must be unique within a batch")
        return self._add("anthropic", "msgbatch_", lines)

    def _anthropic_json(self, batch: _Batch) -> dict[str, Any]:
        ended = batch.ended_at is not None
        status = "ended" if ended else "canceling" if batch.cancel_at is not None else "in_progress"
        succeeded, failed = batch.count(ok=True), batch.count(ok=False)
        canceled = sum(status == 0 for _, status, _ in batch.outcomes)
        return {
            "id": batch.seen.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": {
                "processing": 0 if ended else len(batch.lines),
                "succeeded": succeeded,
                "errored": failed - canceled,
                "canceled": canceled,
                "expired": 0,
            },
            "created_at": _rfc3339(batch.created_at),
            "expires_at": _rfc3339(batch.created_at + DAY_S),
            "ended_at": _rfc3339(batch.ended_at),
            "cancel_initiated_at": _rfc3339(batch.cancel_at),
            "archived_at": None,
            "results_url": f"{self._fake.url}/v1/messages/batches/{batch.seen.id}/results" if ended else None,
        }

    def _anthropic_results(self, batch: _Batch) -> bytes:
        if batch.ended_at is None:
            raise Refusal(400, f"Message Batch {batch.seen.id} has not ended: its results are not available yet")
        rows = []
        for custom_id, status, answer in batch.outcomes:
            result: dict[str, Any] = {"type": "canceled"}
            if status == 200:
                result = {"type": "succeeded", "message": answer}
            elif status:
                error = {"type": anthropic_error_type(status), "message": answer}
                result = {"type": "errored", "error": {"type": "error", "error": error}}
            rows.append({"custom_id": custom_id, "result": result})
        return _jsonl(rows)


def _page(data: list[dict[str, Any]], more: bool) -> dict[str, Any]:
    """A list's page as both providers answer it."""
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return {"data": data, "first_id": first, "last_id": last, "has_more": more}


def _openai_lines(content: bytes) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    """The (custom_id, body) of each line of an OpenAI batch input file, and what is wrong with them (if anything,
    the batch fails)."""
    lines: list[tuple[str, dict[str, Any]]] = []
    errors: list[dict[str, Any]] = []

    def wrong(number: int, code: str, message: str) -> None:
        errors.append({"code": code, "message": message, "param": None, "line": number})

    for number, text in enumerate(content.decode(errors="replace").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            wrong(number, "invalid_json_line", "This line is not parseable as valid JSON.")
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            wrong(number, "missing_required_parameter", "custom_id is required")
        elif line.get("method") != "POST" or line.get("url") != CHAT_ENDPOINT:
            wrong(number, "invalid_url", f"method must be POST and url {CHAT_ENDPOINT}, as the batch's endpoint")
        elif not isinstance(line.get("body"), dict):
            wrong(number, "missing_required_parameter", "body must be a JSON object")
        elif any(custom_id == line["custom_id"] for custom_id, _ in lines):
            wrong(number, "duplicate_custom_id", f"The custom_id {line['custom_id']!r} is used more than once.")
        else:
            lines.append((line["custom_id"], line["body"]))
    if not lines and not errors:
        wrong(0, "empty_file", "The input file has no requests.")
    return lines, errors
