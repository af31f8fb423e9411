"""What model calls cost: a price table in USD per million tokens, overridable by the user.

A model name is priced by the longest table key it starts with, so the dated
names APIs report (``gpt-4o-mini-2024-07-18``, ``claude-sonnet-4-5-20250929``)
find their family, and ``gpt-4o-mini`` is never priced as ``gpt-4o``. Local GGUF
models and scripted doubles cost nothing. A model the table does not know is
*unpriced*: its calls cost 0 here and are reported by name, never guessed.

`PriceTable.priced` is the one place a call is priced, whichever role made it: the loop's roles are priced
by the arbiter as their replies come in, the tune's proposer by the tune as its proposals come in. A call
the response cache answered costs what it cost when it was paid (``cost_usd``: what the results rest on);
when another run had paid for it, that much is also ``saved_usd``, which this run did not spend. What the
provider's prompt cache saved (its reads' discount, less its writes' surcharge) is ``prompt_cache_saved_usd``:
already out of ``cost_usd``, which prices the tokens as they were billed.

See docs/architecture.md, section "The built-in prices, and a user's".
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

from redraft.errors import UserError
from redraft.protocols.messages import Usage

UsdPerMillion = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
"""A price as a price file may give it: finite, not negative, at most a million USD per million tokens."""


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """USD per million tokens."""

    input: UsdPerMillion
    output: UsdPerMillion
    cached_input: UsdPerMillion | None = None
    """Price of prompt tokens served from the provider's cache; the input price if unset."""
    cache_write: UsdPerMillion | None = None
    """Price of prompt tokens written to the provider's cache (Anthropic's 5-minute cache writes); the input
    price if unset (OpenAI charges nothing more for its writes)."""
    batch: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.5
    """A call through the provider's batch API (``--batch``) costs this share of the price above: half, at
    OpenAI and at Anthropic."""


_BUILTIN: dict[str, Price] = {
    # OpenAI
    "gpt-5": Price(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5-mini": Price(input=0.25, cached_input=0.025, output=2.0),
    "gpt-5-nano": Price(input=0.05, cached_input=0.005, output=0.40),
    "gpt-4.1": Price(input=2.0, cached_input=0.50, output=8.0),
    "gpt-4.1-mini": Price(input=0.40, cached_input=0.10, output=1.60),
    "gpt-4.1-nano": Price(input=0.10, cached_input=0.025, output=0.40),
    "gpt-4o": Price(input=2.50, cached_input=1.25, output=10.0),
    "gpt-4o-mini": Price(input=0.15, cached_input=0.075, output=0.60),
    "o3": Price(input=2.0, cached_input=0.50, output=8.0),
    "o4-mini": Price(input=1.10, cached_input=0.275, output=4.40),
    # Anthropic: a 5-minute cache write costs 1.25 times the input price, a read 0.1 times
    "claude-opus-4-5": Price(input=5.0, cached_input=0.50, cache_write=6.25, output=25.0),
    "claude-opus-4": Price(input=15.0, cached_input=1.50, cache_write=18.75, output=75.0),
    "claude-sonnet-4": Price(input=3.0, cached_input=0.30, cache_write=3.75, output=15.0),
    "claude-haiku-4-5": Price(input=1.0, cached_input=0.10, cache_write=1.25, output=5.0),
    "claude-3-5-haiku": Price(input=0.80, cached_input=0.08, cache_write=1.0, output=4.0),
}

_FREE_SUFFIXES = (".gguf",)
_FREE_PREFIXES = ("scripted",)


class PriceTable(msgspec.Struct, frozen=True):
    """Prices by model-name prefix."""

    prices: dict[str, Price]

    def price_of(self, model: str) -> Price | None:
        matches = [key for key in self.prices if model.startswith(key)]
        return self.prices[max(matches, key=len)] if matches else None

    @staticmethod
    def free(model: str) -> bool:
        """Whether ``model``'s calls cost nothing: a local GGUF model or a scripted double."""
        return model.endswith(_FREE_SUFFIXES) or model.startswith(_FREE_PREFIXES)

    def known(self, model: str) -> bool:
        """Whether ``model``'s calls have a price: free, or in the table (an unknown one is reported by name)."""
        return self.free(model) or self.price_of(model) is not None

    def priced(self, model: str, usage: Usage) -> Usage:
        """``usage`` of calls to ``model`` with its ``cost_usd``, ``saved_usd`` and ``prompt_cache_saved_usd``
        set (0 for a model the table does not know: `known`). The saved share is the calls' share of
        ``saved_calls``, exact when a reply's calls were all answered by the cache or none (a reply's calls are
        asked again together)."""
        cost = self.cost(model, usage) or 0.0
        share = min(1.0, usage.saved_calls / usage.calls) if usage.calls else 0.0
        saved = cost if share == 1.0 else cost * share
        by_prompt_cache = self.prompt_cache_saving(model, usage)
        return msgspec.structs.replace(usage, cost_usd=cost, saved_usd=saved, prompt_cache_saved_usd=by_prompt_cache)

    def cost(self, model: str, usage: Usage) -> float | None:
        """USD for one call's usage; 0 for local and scripted models; None if the model is unpriced."""
        if self.free(model):
            return 0.0
        price = self.price_of(model)
        if price is None:
            return None
        cached, written = _cache_tokens(usage)
        dollars = (
            (usage.input_tokens - cached - written) * price.input
            + cached * _or(price.cached_input, price.input)
            + written * _or(price.cache_write, price.input)
            + usage.output_tokens * price.output
        )
        return dollars / 1e6 * (price.batch if usage.batch_calls else 1.0)

    def prompt_cache_saving(self, model: str, usage: Usage) -> float:
        """USD the provider's prompt cache saved ``usage``: its reads at the input price less their price, less
        what its writes cost above the input price (negative when the writes were not read back); 0 for a
        free or unpriced model."""
        price = None if self.free(model) else self.price_of(model)
        if price is None:
            return 0.0
        cached, written = _cache_tokens(usage)
        dollars = cached * (price.input - _or(price.cached_input, price.input)) - written * (
            _or(price.cache_write, price.input) - price.input
        )
        return dollars / 1e6 * (price.batch if usage.batch_calls else 1.0)


def _cache_tokens(usage: Usage) -> tuple[int, int]:
    """(read, written) prompt tokens of ``usage``, bounded by its input tokens."""
    cached = min(usage.cached_tokens, usage.input_tokens)
    return cached, min(usage.cache_write_tokens, usage.input_tokens - cached)


def _or(price: float | None, otherwise: float) -> float:
    return otherwise if price is None else price


def default_prices() -> PriceTable:
    return PriceTable(dict(_BUILTIN))


def load_prices(path: str | Path | None) -> PriceTable:
    """The built-in table, with the entries of the JSON file at ``path`` added or replaced."""
    table = default_prices()
    if path is None:
        return table
    try:
        extra = msgspec.json.decode(Path(path).read_bytes(), type=dict[str, Price])
    except FileNotFoundError:
        raise UserError(f"price file not found: {path}") from None
    except OSError as exc:  # a directory, a file nobody may read
        raise UserError(f"cannot read price file {path}: {exc.strerror}") from None
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UserError(f"bad price file {path}: {exc}") from None
    return PriceTable(table.prices | extra)
