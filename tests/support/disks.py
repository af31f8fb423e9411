"""A small filesystem of its own for a test that fills it or makes it read-only: a tmpfs mounted under the test's
directory, or a skip where this machine does not let the test mount one (not root, no CAP_SYS_ADMIN)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``24k``) mounted at ``where``, unmounted after."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def remount(where: Path, options: str) -> None:
    """Change a mounted tmpfs's options: ``size=4m`` (space freed), ``ro`` or ``rw``."""
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True, capture_output=True)
