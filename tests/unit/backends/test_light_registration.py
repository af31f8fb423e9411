"""Naming a backend loads no client: the driver resolves every spec and each actor loads the registry, so
the HTTP stack and llama.cpp (with numpy) load only where a client of theirs is made."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("aiohttp", "numpy", "llama_cpp", "openai", "anthropic", "httpx")


def _loaded_after(code: str) -> list[str]:
    """The modules of HEAVY a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = {**os.environ, "OPENAI_API_KEY": "unused", "ANTHROPIC_API_KEY": "unused"}  # the driver checks one is set
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120, env=env
    )
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_resolving_every_backend_spec_imports_no_client() -> None:
    code = (
        "from redraft.backends.registry import resolve\n"
        "for spec in ('openai:gpt-4o-mini', 'openai-compatible:m@http://127.0.0.1:9/v1', 'anthropic:claude-x',"
        " 'local'):\n"
        "    resolve(spec)\n"
    )
    assert _loaded_after(code) == []


def test_a_compatible_client_loads_aiohttp_and_not_llama_cpp() -> None:
    code = (
        "from redraft.backends.registry import resolve\nresolve('openai-compatible:m@http://127.0.0.1:9/v1').create()\n"
    )
    assert _loaded_after(code) == ["aiohttp"]
