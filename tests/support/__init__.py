"""What the tests share: scripted reply policies, fake servers, run directories, the one-task harness.

Imported as ``tests.support.NAME``; the repository root is on ``sys.path`` (pytest puts it there,
and subprocesses and Ray workers started by a test run from it or get it on ``PYTHONPATH``).
"""
