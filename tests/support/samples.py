"""One fully populated message of every kind, shared by protocol tests and golden frames.

`ALL` holds one message of each kind of the current wire version with every field set (none at its
default, `tests.unit.protocols.test_messages` checks it), so the golden frames pin each field. They are
saved as ``tests/golden/v1`` by ``python -m tests.support.samples``, run from the repository's root, once,
when a wire version is made.
"""

from __future__ import annotations

import msgspec

from redraft.protocols.messages import (
    Attempt,
    CandidateGrade,
    CandidateText,
    ChatMessage,
    CheckResult,
    ColumnProfile,
    Critique,
    CritiqueRequest,
    Decision,
    Draft,
    DraftRequest,
    Grade,
    GradeRequest,
    Intent,
    Issue,
    Message,
    Observation,
    PlanAsk,
    PlanStep,
    PlanVersion,
    Reflection,
    ReflectRequest,
    Result,
    Revision,
    StageStep,
    StepContract,
    StepRun,
    Task,
    Usage,
    Verification,
    VerificationQuestion,
    VerifyRequest,
)

GOLD_TASK = Task(
    task_id="t-1",
    scenario="arithmetic",
    prompt="Mia has 3 apples...",
    reference={"note": "x"},
    gold={"answer": 7},
)
TASK = GOLD_TASK.without_gold()
"""The task as every role receives it (the gold stripped)."""
USAGE = Usage(
    input_tokens=50,
    output_tokens=12,
    calls=1,
    cached_tokens=20,
    cost_usd=0.25,
    cache_hits=1,
    batch_calls=1,
    saved_calls=1,
    saved_usd=0.125,
    cache_write_tokens=10,
    prompt_cache_saved_usd=0.0625,
)
"""Every field set, so the golden frames pin each of the records' too."""
SENT = [ChatMessage(role="system", content="Be exact."), ChatMessage(role="user", content="What is 3 + 4?")]
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
    stage="draft",
    edits_applied=1,
    edit_errors=["edit 2 did not apply: its SEARCH text 'x' is not in the answer"],
    messages=SENT,
)
CHECK = CheckResult(name="final_answer", passed=False, score=0.0, detail="the final answer 8 is wrong")
ISSUE = Issue(severity="critical", quote="3 + 4 = 8", reason="3 + 4 is 7", fix="write 7")
QUESTION = VerificationQuestion(question="What is 3 + 4?", answer="7")
STAGE = StageStep(name="draft", index=1, total=3, instruction="Write the answer.", previous="1. add 3 and 4")
REVISION = Revision(
    best_text="3 + 4 = 8\nAnswer: 8",
    best_score=0.0,
    failed_checks=[CHECK],
    issues=[ISSUE],
    memory=[
        Attempt(round=0, answer="8", score=0.0, summary="the final answer 8 is wrong", reflection="I added wrong.")
    ],
    questions=[QUESTION],
)
CONTRACT = StepContract(columns=["order_id", "order_date"], types={"order_date": "date"}, min_rows=1, max_rows=500)
PLAN = [
    PlanStep(number=1, intent="gather the orders", inputs=["orders.csv"], output="gathered.csv", contract=CONTRACT),
    PlanStep(number=2, intent="normalise the dates", inputs=["gathered.csv"], output="output.csv", contract=CONTRACT),
]
OBSERVATION = Observation(
    step=1,
    returncode=0,
    killed="killed: wall-clock timeout",
    stderr_tail="warning: 2 rows skipped",
    output="gathered.csv",
    written=True,
    rows=2,
    columns=[ColumnProfile(name="order_date", type="date", patterns={"YYYY-MM-DD": 1, "DD.MM.YYYY": 1}, distinct=2)],
    sample=[["ORD-00001", "2024-03-05"]],
    files={"gathered.csv": b"order_id,order_date\nORD-00001,2024-03-05\nORD-00002,05.03.2024\n"},
    program="print('gather')",
)
ASK = PlanAsk(
    kind="decide",
    steps=PLAN,
    step=1,
    verified=[1],
    observations=[msgspec.structs.replace(OBSERVATION, files={})],
    checks=[CHECK],
    code="print('gather')",
)

ALL: list[Message] = [
    GOLD_TASK,
    DraftRequest(
        task=TASK,
        round=1,
        sample=2,
        seed=12345,
        revision=REVISION,
        stage=STAGE,
        mode="patch",
        intent=Intent(action="escalate", state="localized", best_score=0.0),
        plan=ASK,
    ),
    DRAFT,
    VerifyRequest(
        task=TASK, draft=DRAFT, stage="draft", questions=3, step=StepRun(step=PLAN[1], files=OBSERVATION.files)
    ),
    Verification(
        task_id="t-1",
        round=1,
        sample=2,
        score=1.0,
        passed=True,
        answer="7",
        checks=[CheckResult(name="final_answer", passed=True, score=1.0, detail="ok")],
        stage="draft",
        questions=[QUESTION],
        usage=USAGE,
        model="m.gguf",
        oracle=True,
        observation=OBSERVATION,
    ),
    CritiqueRequest(task=TASK, draft=DRAFT, stance="skeptic", opponent=[ISSUE], seed=777),
    Critique(
        task_id="t-1",
        round=1,
        sample=2,
        issues=[ISSUE],
        usage=USAGE,
        model="m.gguf",
        error="the critic's reply was cut off",
        stance="skeptic",
        messages=SENT,
    ),
    ReflectRequest(task=TASK, draft=DRAFT, failed_checks=[CHECK], memory=REVISION.memory, seed=778),
    Reflection(task_id="t-1", round=1, sample=2, text="I added wrong.", usage=USAGE, model="m.gguf", messages=SENT),
    Decision(
        task_id="t-1",
        round=1,
        action="stop",
        reason="budget",
        best_round=1,
        best_sample=2,
        best_score=1.0,
        round_best_score=1.0,
        rolled_back=True,
        detail="calls budget spent: 9 of 9",
        limit="calls",
        round_best_sample=2,
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
        stop_reason="error",
        usage=USAGE,
        wall_s=1.5,
        error="CheckError: the check raised KeyError: 'answer'",
        usage_by_role={"drafter": USAGE},
        unpriced_models=["m.gguf"],
        error_type="CheckError",
        stop_limit="task_timeout",
        best_round=1,
        best_sample=2,
        initial_sample=0,
        grade=1.0,
        graded_pass=True,
        initial_grade=0.25,
        initial_graded_pass=False,
        attempts=2,
        retried_for=["ActorDiedError"],
        error_raised="KeyError",
        error_where="check.py:5 in answer",
        traceback="Traceback (most recent call last):\n  check.py:5 in answer\nKeyError: 'answer'",
        grade_error="ProtocolError",
    ),
    GradeRequest(task=GOLD_TASK, candidates=[CandidateText(round=1, sample=2, text="3 + 4 = 7\nAnswer: 7")]),
    Grade(
        task_id="t-1",
        gold={"answer": 7},
        grades=[
            CandidateGrade(
                round=1,
                sample=2,
                score=0.75,
                passed=True,
                detail="the answer 7 is right",
                scores=[1.0, 0.5],
                passes=[True, False],
            )
        ],
        error="the grade function raised",
        judge="openai:gpt-4o-mini",
        usage=Usage(input_tokens=300, output_tokens=40, calls=2),
        error_type="ValueError",
    ),
    PlanVersion(
        task_id="t-1",
        round=0,
        version=2,
        reason="order_date holds two date formats: normalise them",
        steps=PLAN,
        trigger_step=1,
        observation=msgspec.structs.replace(OBSERVATION, files={}, program=""),
        added=[2],
        removed=[3],
        changed=[1],
        kept=[1],
    ),
]


if __name__ == "__main__":  # write the golden frames of the current version (once, when a version is made)
    from redraft.protocols.messages import WIRE_VERSION, encode
    from tests.support.paths import GOLDEN

    folder = GOLDEN / f"v{WIRE_VERSION}"
    folder.mkdir(parents=True, exist_ok=True)
    for message in ALL:
        (folder / f"{type(message).__struct_config__.tag}.msgpack").write_bytes(encode(message))
