"""A figure's 95 % interval, as every table of ``comparison.json`` keeps it (``{"low": ..., "high": ...}``)."""

from __future__ import annotations

import msgspec


class Interval(msgspec.Struct, frozen=True):
    low: float
    high: float
