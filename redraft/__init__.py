"""redraft: refine LLM outputs in loops of draft, critique, verify and decide, at scale, on Ray.

The public API: `refine` and `refine_async` (one task, in this process), `run` (a batch on Ray, resumable),
`compare` (strategies against sampling at matched cost, on Ray), `RunConfig` (every setting, named as the
command line's flags), `Task` and `Result`, and what they return (`Refinement`, `RunOutcome`,
`ComparisonOutcome`). Everything else is internal.
"""

from redraft.actors import RunOutcome, run
from redraft.comparison import Comparison, ComparisonOutcome, compare
from redraft.config import RunConfig
from redraft.engine import Refinement, refine, refine_async
from redraft.protocols.messages import Result, Task

__all__ = [
    "Comparison",
    "ComparisonOutcome",
    "Refinement",
    "Result",
    "RunConfig",
    "RunOutcome",
    "Task",
    "compare",
    "refine",
    "refine_async",
    "run",
]
__version__ = "0.1.0"
