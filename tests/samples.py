"""One fully populated message of every kind, shared by protocol tests and golden frames."""

from __future__ import annotations

from redraft.protocols.messages import (
    Attempt,
    CheckResult,
    Critique,
    CritiqueRequest,
    Decision,
    Draft,
    DraftRequest,
    Issue,
    Message,
    Result,
    Revision,
    Task,
    Usage,
    Verification,
    VerifyRequest,
)

TASK = Task(task_id="t-1", scenario="arithmetic", prompt="Mia has 3 apples...", reference={"answer": 7, "note": "x"})
USAGE = Usage(input_tokens=50, output_tokens=12, calls=1)
DRAFT = Draft(
    task_id="t-1",
    round=1,
    sample=2,
    text="3 + 4 = 7\nAnswer: 7",
    usage=USAGE,
    model="m.gguf",
    finish_reason="stop",
    latency_s=0.25,
    node_id="node-a",
)
CHECK = CheckResult(name="final_answer", passed=False, score=0.0, detail="the final answer 8 is wrong")
ISSUE = Issue(severity="critical", quote="3 + 4 = 8", reason="3 + 4 is 7", fix="write 7")
REVISION = Revision(
    best_text="3 + 4 = 8\nAnswer: 8",
    best_score=0.0,
    failed_checks=[CHECK],
    issues=[ISSUE],
    memory=[Attempt(round=0, answer="8", score=0.0, summary="the final answer 8 is wrong")],
)

ALL: list[Message] = [
    TASK,
    DraftRequest(task=TASK, round=1, sample=2, seed=12345, revision=REVISION),
    DRAFT,
    VerifyRequest(task=TASK, draft=DRAFT),
    Verification(
        task_id="t-1",
        round=1,
        sample=2,
        score=1.0,
        passed=True,
        answer="7",
        checks=[CheckResult(name="final_answer", passed=True, score=1.0, detail="ok")],
    ),
    CritiqueRequest(task=TASK, draft=DRAFT, stance="adversarial"),
    Critique(task_id="t-1", round=1, sample=2, issues=[ISSUE], usage=USAGE, model="m.gguf", error=None),
    Decision(
        task_id="t-1",
        round=1,
        action="stop",
        reason="threshold",
        best_round=1,
        best_sample=2,
        best_score=1.0,
        round_best_score=1.0,
        rolled_back=False,
        detail="best score 1 >= threshold 1",
    ),
    Result(
        task_id="t-1",
        scenario="arithmetic",
        answer="7",
        text="3 + 4 = 7\nAnswer: 7",
        score=1.0,
        passed=True,
        initial_score=0.0,
        initial_passed=False,
        rounds=2,
        stop_reason="threshold",
        usage=USAGE,
        wall_s=1.5,
    ),
]
