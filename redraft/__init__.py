"""redraft: refine LLM outputs in loops of draft, critique, verify and decide, at scale, on Ray."""

from redraft.protocols.messages import Result, Task
from redraft.run import RunConfig, RunOutcome, refine, run

__all__ = ["Result", "RunConfig", "RunOutcome", "Task", "refine", "run"]
__version__ = "0.1.0"
