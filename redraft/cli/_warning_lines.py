"""A `redraft.errors.RedraftWarning` is one line on stderr, ``redraft: warning: ...``, as errors are."""

from __future__ import annotations

import sys
import warnings
from typing import Any

from redraft.errors import RedraftWarning

_PYTHON_SHOWS = warnings.showwarning


def show_warnings_as_lines() -> None:
    """From now on, in this process: redraft's warnings as one line of ours, any other as Python shows it."""
    warnings.showwarning = _show


def _show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    if issubclass(category, RedraftWarning):
        print(f"redraft: warning: {message}", file=sys.stderr)
    else:
        _PYTHON_SHOWS(message, category, *args, **kwargs)
