"""redraft: refine LLM outputs in loops of draft, critique, verify and decide, at scale, on Ray."""

from redraft.actors.driver import RunOutcome, run
from redraft.config import RunConfig
from redraft.engine.refine import refine
from redraft.protocols.messages import Result, Task

__all__ = ["Result", "RunConfig", "RunOutcome", "Task", "refine", "run"]
__version__ = "0.1.0"
