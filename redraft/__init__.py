"""redraft: refine LLM outputs in loops of draft, critique, verify and decide, at scale, on Ray."""

from redraft.actors import RunOutcome, run
from redraft.config import RunConfig
from redraft.engine import Refinement, refine, refine_async
from redraft.protocols.messages import Result, Task

__all__ = ["Refinement", "Result", "RunConfig", "RunOutcome", "Task", "refine", "refine_async", "run"]
__version__ = "0.1.0"
