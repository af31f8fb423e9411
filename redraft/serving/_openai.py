"""The OpenAI Chat Completions wire, as redraft serve speaks it: requests read once at the boundary, responses,
stream chunks and errors written in OpenAI's shapes, so an OpenAI client works unchanged.

A request is validated here and nowhere else (`read_request`): a body that is not UTF-8 JSON of the request's
shape (wrong types, nesting past the decoder's depth) is a 400; unknown top-level fields are ignored, as OpenAI's
clients send many; the ``redraft`` object (the SDK's ``extra_body``) is strict, so a mistyped option is refused
rather than silently dropped. Every refusal is an `APIError`, which the app writes as
``{"error": {"message", "type", "param", "code"}}`` with its status.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import msgspec

ErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "not_found_error",
    "insufficient_quota",
    "server_error",
    "service_unavailable",
    "timeout",
]


class APIError(Exception):
    """A request refused or failed, said in OpenAI's error shape with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: ErrorType = "invalid_request_error",
        *,
        param: str | None = None,
        code: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        return {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}


class TextPart(msgspec.Struct, frozen=True):
    type: str
    text: str = ""


class ChatMessage(msgspec.Struct, frozen=True):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            if any(part.type != "text" for part in self.content):
                raise APIError(400, "only text content is served", param="messages")
            return "\n".join(part.text for part in self.content)
        return self.content or ""


class Budget(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one request may spend: its loop stops at the first limit reached."""

    usd: float | None = msgspec.field(default=None)
    calls: int | None = None
    tokens: int | None = None


class RedraftOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The request's ``redraft`` object (``extra_body={"redraft": {...}}``)."""

    samples: int | None = None
    rounds: int | None = None
    budget: Budget | None = None
    critic: str | None = None
    """The critic's model (a backend spec), over the server's."""
    check: str | None = None
    """A check the server was started with (``--check NAME=...``), or a built-in scenario's, by name."""
    data: dict[str, Any] = {}
    """What the check reads beside the answer (the task's reference: a schema, the expected answer...)."""


class StreamOptions(msgspec.Struct, frozen=True):
    include_usage: bool = False


class ChatRequest(msgspec.Struct, frozen=True):
    model: str
    messages: list[ChatMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int = 1
    temperature: float | None = None
    redraft: RedraftOptions = RedraftOptions()

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


_DECODER = msgspec.json.Decoder(ChatRequest)
MAX_DATA_DEPTH = 64
"""How deep a request's ``redraft.data`` may nest: its trace is written, and written back, by recursive encoders."""


def read_request(body: bytes) -> ChatRequest:
    """The request in ``body``; `APIError` 400 naming what is wrong with it."""
    try:
        request = _DECODER.decode(body)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where = text.rsplit("`$.", 1)[-1].rstrip("`") if "`$." in text else None
        raise APIError(400, f"invalid request: {text}", param=where) from None
    except msgspec.DecodeError as exc:
        raise APIError(400, f"the body is not JSON: {exc}") from None
    except UnicodeDecodeError as exc:  # msgspec checks a string's UTF-8 only when it makes the str
        raise APIError(400, f"the body is not UTF-8 text: byte {exc.start} is not UTF-8") from None
    except RecursionError:  # the nesting a request's free-form ``data`` would hold past the decoder's depth
        raise APIError(400, "the body's JSON is nested too deep to read") from None
    if not request.messages:
        raise APIError(400, "messages must hold at least one message", param="messages")
    if _depth(request.redraft.data) > MAX_DATA_DEPTH:
        raise APIError(400, f"redraft.data is nested deeper than {MAX_DATA_DEPTH} levels", param="redraft.data")
    if request.n != 1:
        raise APIError(400, "n must be 1: a refined answer is one answer", param="n")
    return request


def _depth(value: Any) -> int:
    """How deep ``value``'s lists and objects nest (walked without recursion)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        deepest = max(deepest, level)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        todo.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def completion(request_id: str, model: str, text: str, usage: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}
        ],
        "usage": usage,
        "redraft": extra,
    }


def chunk(request_id: str, model: str, delta: dict[str, Any], finish: str | None = None, **more: Any) -> bytes:
    """One ``chat.completion.chunk`` as a server-sent event."""
    body = {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}] if delta or finish else [],
        **more,
    }
    return b"data: " + msgspec.json.encode(body) + b"\n\n"


def comment(text: str) -> bytes:
    """An SSE comment: progress a client ignores, which keeps the connection alive."""
    return b": " + " ".join(text.split()).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def error_event(error: APIError) -> bytes:
    """An error met after the stream began: OpenAI's clients raise it from the event."""
    return b"data: " + msgspec.json.encode(error.body()) + b"\n\n"


def model_list(names: list[str]) -> dict[str, Any]:
    created = int(time.time())
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": created, "owned_by": "redraft"} for name in names],
    }
