"""Where things are in the repository, so a test file can move without counting ``..``."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: ``PYTHONPATH`` and working directory for subprocesses that import ``tests``."""
TESTS = REPO_ROOT / "tests"
GOLDEN = TESTS / "golden"
"""Saved frames of every wire version (``golden/vN/KIND.msgpack``)."""
FIXTURES = TESTS / "fixtures"
"""Run directories written by older versions, kept as they were written."""
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
"""The documentation site's pages (``mkdocs.yml`` at the root builds them)."""
