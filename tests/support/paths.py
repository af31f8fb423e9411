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
PRERELEASE_RUN = FIXTURES / "prerelease-run"
"""A run directory the pre-release code wrote (wire version 5, before 0.1.0), which 0.1.0 refuses in one line.
Made once at commit 12bed75 by ``tests.support.report_runs.make_run(root, max_rounds=2)`` with its ``PLANS`` cut
to their first two tasks: two refined tasks and one lost with its arbiter."""
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
"""The documentation site's pages (``mkdocs.yml`` at the root builds them)."""
