"""The rubrics the built-in scenarios ship (package data, ``data/NAME-rubric.toml``), read as tables.

A judge validates a table where it takes it (`redraft.judging.scenario_rubric`); the tests hold every shipped
one to the format.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files
from typing import Any


def shipped_rubric(name: str) -> dict[str, Any]:
    """The table of the rubric shipped as ``data/NAME-rubric.toml``."""
    return tomllib.loads(files("redraft.scenarios.builtin").joinpath("data", f"{name}-rubric.toml").read_text("utf-8"))
