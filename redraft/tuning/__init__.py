"""``redraft tune``: refine the prompts themselves, on train tasks, with a verdict on a test split read once.

See `redraft.tuning._api` for the layout of a tune's directory and `redraft.tuning._search` for the search.
"""

from redraft.tuning._api import TuneHooks, TuneOutcome, TunePlugins, TuneSettings, tune
from redraft.tuning._splits import parse_fractions
from redraft.tuning._status import TuneStatus
from redraft.tuning._verdict import TuneVerdict

__all__ = [
    "TuneHooks",
    "TuneOutcome",
    "TunePlugins",
    "TuneSettings",
    "TuneStatus",
    "TuneVerdict",
    "parse_fractions",
    "tune",
]
