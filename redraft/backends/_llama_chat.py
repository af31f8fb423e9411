"""Chat requests turned into token prompts exactly as ``Llama.create_chat_completion`` turns them.

The batched path bypasses ``create_chat_completion``, so it must rebuild what
that call would have decoded: the model's own chat template (the GGUF's
``tokenizer.chat_template``, rendered by llama-cpp-python's
``Jinja2ChatFormatter`` with the same BOS/EOS text), tokenized with special
tokens and no extra BOS, plus the formatter's stop string (the EOS text). A
JSON schema becomes the same GBNF grammar ``response_format`` would build.
`ChatPrompts.for_model` returns None for a model whose chat format
llama-cpp-python picks another way (no template, or one of its built-in
formats); such models keep the sequential path.
"""

from __future__ import annotations

import importlib
import json
from functools import lru_cache
from typing import Any

from redraft.backends._llama_batch import Generation
from redraft.backends.base import ChatRequest
from redraft.errors import BackendError

TEMPLATE_KEY = "tokenizer.chat_template"


class ChatPrompts:
    """Formats and tokenizes chat requests for one model with its Jinja chat template."""

    def __init__(self, formatter: Any, tokenize: Any) -> None:
        self._formatter = formatter
        self._tokenize = tokenize

    @classmethod
    def for_model(cls, model: Any, tokenize: Any) -> ChatPrompts | None:
        """The prompts of `model` (a llama-cpp-python ``LlamaModel``), or None if its template is not Jinja-rendered."""
        chat_format = importlib.import_module("llama_cpp.llama_chat_format")
        metadata: dict[str, str] = model.metadata()
        if TEMPLATE_KEY not in metadata or chat_format.guess_chat_format_from_gguf_metadata(metadata) is not None:
            return None
        eos, bos = model.token_eos(), model.token_bos()
        formatter = chat_format.Jinja2ChatFormatter(
            template=metadata[TEMPLATE_KEY],
            eos_token=model.token_get_text(eos) if eos != -1 else "",
            bos_token=model.token_get_text(bos) if bos != -1 else "",
            stop_token_ids=[eos],
        )
        return cls(formatter, tokenize)

    def prompt(self, request: ChatRequest) -> tuple[list[int], list[str]]:
        """The prompt tokens and the formatter's own stop strings."""
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        try:
            formatted = self._formatter(messages=messages)
        except Exception as exc:  # the template's raise_exception, or a Jinja error
            raise BackendError(f"the chat template rejected the request: {exc}") from None
        stops = formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]
        return self._tokenize(formatted.prompt), [s for s in stops if s]

    def generation(self, request: ChatRequest) -> Generation:
        tokens, template_stops = self.prompt(request)
        stops = [*request.stop, *template_stops]
        grammar = None if request.json_schema is None else grammar_for_schema(json.dumps(request.json_schema))
        return Generation(
            prompt=tuple(tokens),
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            seed=request.seed,
            stop=tuple(s.encode("utf-8") for s in stops),
            grammar=grammar,
        )


@lru_cache(maxsize=32)
def grammar_for_schema(schema: str) -> str:
    """The GBNF text for a JSON schema, falling back to any-JSON as ``response_format`` does."""
    grammars = importlib.import_module("llama_cpp.llama_grammar")
    try:
        return str(grammars.json_schema_to_gbnf(schema))
    except Exception:  # llama-cpp-python's own fallback for schemas it cannot convert
        return str(grammars.JSON_GBNF)
