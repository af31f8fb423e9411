"""The sequence slots of the batched host's context: which one a request takes, what its KV stream starts from.

Only the scheduler thread of `redraft.backends._llama_batch` uses a `Slots`; that module's
docstring states the invariants these choices keep. A free slot is empty, or keeps the prompt
of the sequence that finished in it (the prompt's KV cells, and the logits its first draw was
made from) until the slot is needed. A request takes the slot that kept its prompt, else the
free slot beside the most taken ones: llama.cpp decodes the sequences of separate KV streams in
one graph only when their ids follow one another (`graphs`). When its prompt's turn comes, its
stream is filled with the longest prefix of the prompt that any stream holds, so only the rest
is evaluated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redraft.backends._llama_sequence import Sequence

MIN_PREFIX = 16
"""The shortest common prefix worth copying a KV stream for (a copy moves the whole stream)."""


class Slots:
    """The free slots of one llama.cpp context, the prompts they keep, and the changes to their KV streams."""

    def __init__(self, lib: Any, memory: Any, parallel: int) -> None:
        self._lib = lib
        self._memory = memory
        self._free = list(range(parallel - 1, -1, -1))
        self._kept: dict[int, tuple[tuple[int, ...], Any]] = {}
        """Free slots whose KV stream still holds a finished sequence's prompt, with its first logits, oldest
        first."""

    @property
    def any_free(self) -> bool:
        return bool(self._free)

    def take(
        self, prompt: tuple[int, ...], active: list[Sequence], waiting: Iterable[Sequence]
    ) -> tuple[int, Any, tuple[int, ...]]:
        """A free slot for the next sequence: one that kept ``prompt`` (with its first logits), else an empty
        one, else a kept one whose prompt no ``waiting`` request has. Among those it takes the slot next to
        the most ``active`` ones (a step decodes one run of consecutive slots per graph: `graphs`), then the
        lowest empty or the least recently kept. Returns the slot, the logits if it kept ``prompt``, and
        otherwise the tokens its stream still holds (for `reuse_prefix`)."""
        slot = next((slot for slot, (kept, _) in self._kept.items() if kept == prompt), None)
        if slot is None:
            candidates = sorted(slot for slot in self._free if slot not in self._kept)
            if not candidates:  # only then the waiting prompts matter (hashing each is a pass over its tokens)
                wanted = {sequence.request.prompt for sequence in waiting}
                candidates = [slot for slot, (kept, _) in self._kept.items() if kept not in wanted] or list(self._kept)
            taken = {sequence.slot for sequence in active}
            slot = max(candidates, key=lambda s: ((s - 1) in taken) + ((s + 1) in taken))  # first of the best
        self._free.remove(slot)
        kept, logits = self._kept.pop(slot, ((), None))
        return slot, logits if kept == prompt else None, kept

    def reuse_prefix(self, slot: int, held: tuple[int, ...], prompt: tuple[int, ...], active: list[Sequence]) -> int:
        """Fill ``slot``'s stream with the longest prefix of ``prompt`` any stream holds; its length (0: none).

        ``held`` is what the slot's own stream holds; the kept prompts' streams and those of the
        ``active`` sequences are the other donors. Another donor's stream is copied whole and cut
        after the prefix. At least the prompt's last token is left to evaluate: its logits give
        the first draw.
        """
        donor, best = slot, common_prefix(held, prompt)
        streams = [(s, kept) for s, (kept, _) in self._kept.items()]
        streams += [(s.slot, s.evaluated()) for s in active if s.slot != slot and s.position > 0]
        for other, tokens in streams:
            length = common_prefix(tokens, prompt)
            if length > best:
                donor, best = other, length
        best = min(best, len(prompt) - 1)
        if best < MIN_PREFIX:
            if held:
                self._lib.llama_memory_seq_rm(self._memory, slot, -1, -1)
            return 0
        if donor != slot:
            self._lib.llama_memory_seq_cp(self._memory, donor, slot, -1, -1)
        self._lib.llama_memory_seq_rm(self._memory, slot, best, -1)
        return best

    def copy(self, source: int, target: int) -> None:
        """Copy ``source``'s KV stream into ``target``'s."""
        self._lib.llama_memory_seq_cp(self._memory, source, target, -1, -1)

    def cut(self, slot: int, length: int) -> None:
        """Remove the cells of ``slot``'s stream from position ``length`` on."""
        self._lib.llama_memory_seq_rm(self._memory, slot, length, -1)

    def release(self, slot: int, keep: tuple[tuple[int, ...], Any] | None) -> None:
        """Free ``slot``. With ``keep`` (a prompt and its first logits), its stream keeps the prompt's cells
        for a later request with the same prompt; without, it is emptied."""
        if keep is not None:
            self._lib.llama_memory_seq_rm(self._memory, slot, len(keep[0]), -1)
            self._kept[slot] = keep
        else:
            self._lib.llama_memory_seq_rm(self._memory, slot, -1, -1)
        self._free.append(slot)


def graphs(slots: list[int]) -> int:
    """How many graphs llama.cpp decodes one token of each of these sequences in, rows in this order.

    With a KV stream per sequence it fills a graph with the first row's sequence and each
    later row whose id is one more than the last taken, then starts again from the first row
    left (``llama_batch_allocr::split_equal``).
    """
    left, count = list(slots), 0
    while left:
        run = [left[0]]
        for slot in left[1:]:
            if slot == run[-1] + 1:
                run.append(slot)
        left = [slot for slot in left if slot not in run]
        count += 1
    return count


def common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
