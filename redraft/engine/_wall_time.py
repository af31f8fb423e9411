"""A run's wall time before its first call: the tokens and calls of each course of the estimate, at each model's
measured or stated speed.

- The embedded model (any ``.gguf`` file): one host per node serves every role's calls, batched, so its time is
  the run's tokens at the host's rates, one node's worth: `EMBEDDED_OUTPUT_TOKENS_S` made and
  `EMBEDDED_PROMPT_TOKENS_S` read, both recorded through one demo on 2 quiet cores. Another GGUF file is taken at
  the same rates (a larger file is slower).
- A provider's model: each call `PROVIDER_CALL_S` plus its output at `PROVIDER_OUTPUT_TOKENS_S`, a stated
  default rather than a measure; the run's tasks in flight overlap their calls.
- A scripted model takes no time.

Ray's start and the model's first load are not counted (seconds to a minute on a loaded machine), nor a machine
busier than the one the rates were measured on: the progress line says as the run goes how fast the model is.
"""

from __future__ import annotations

from collections.abc import Mapping

from redraft.protocols.messages import Usage

EMBEDDED_OUTPUT_TOKENS_S = 116.0
"""Tokens the embedded model's host makes a second, batched: 14,423 in 124 s of decoding through one instrumented
demo (2026-11-24, 2 cores, quiet; docs/benchmarks.md)."""
EMBEDDED_PROMPT_TOKENS_S = 935.0
"""Prompt tokens it takes a second, prefixes another stream held reused: the same demo's 59,545 in 63.7 s."""
PROVIDER_CALL_S = 1.0
"""A provider's call before its first token (a stated default: network and queueing, not measured here)."""
PROVIDER_OUTPUT_TOKENS_S = 50.0
"""A provider's tokens a second after the first (a stated default)."""
PROVIDER_IN_FLIGHT = 64
"""Tasks in flight on providers when the run does not say (the dispatcher's own default)."""


def pace_of(model: str) -> str:
    """``embedded`` (a ``.gguf`` file), ``scripted`` or ``provider``: how a model's calls take time."""
    if model.endswith(".gguf"):
        return "embedded"
    return "scripted" if model.startswith("scripted") else "provider"


def wall_seconds(by_role: Mapping[str, Usage], models: Mapping[str, str], in_flight: int | None) -> float:
    """The wall time of ``by_role``'s calls, each role's at its model's pace (``models``: role to model name),
    with ``in_flight`` tasks at once (None: the dispatcher's default)."""
    embedded = provider = 0.0
    for role, usage in by_role.items():
        pace = pace_of(models.get(role, "scripted"))
        if pace == "embedded":
            embedded += usage.input_tokens / EMBEDDED_PROMPT_TOKENS_S + usage.output_tokens / EMBEDDED_OUTPUT_TOKENS_S
        elif pace == "provider":
            provider += usage.calls * PROVIDER_CALL_S + usage.output_tokens / PROVIDER_OUTPUT_TOKENS_S
    return embedded + provider / max(1, in_flight or PROVIDER_IN_FLIGHT)


def basis(models: Mapping[str, str]) -> str:
    """How the wall time was come to, for the models a run uses."""
    paces = {pace_of(model) for model in models.values()}
    said = []
    if "embedded" in paces:
        said.append(
            f"the embedded model at {EMBEDDED_OUTPUT_TOKENS_S:.0f} tokens/s made and {EMBEDDED_PROMPT_TOKENS_S:.0f} "
            "read, one host per node (recorded through the demo on 2 quiet cores, 2026-11-24)"
        )
    if "provider" in paces:
        said.append(
            f"a provider's call at {PROVIDER_CALL_S:g} s plus {PROVIDER_OUTPUT_TOKENS_S:.0f} tokens/s (a stated "
            "default, not measured), the tasks in flight overlapping"
        )
    if not said:
        return "time: the models are scripted and take none"
    load = ", the model's first load" if "embedded" in paces else ""
    return "time: " + "; ".join(said) + f"; not counted: Ray's start{load}, a busier machine"


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.5 h``: a wall time as an estimate says it (no false precision)."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
