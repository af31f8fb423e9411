"""The shapes models answer in: schemas generated from the Structs, replies validated against them."""

from __future__ import annotations

import json

import msgspec
import pytest

from redraft.engine._answers import (
    MAX_ISSUES,
    MAX_QUESTIONS,
    CritiqueReport,
    critique_json_schema,
    parse_plan,
    parse_report,
    question_json_schema,
)
from redraft.protocols.messages import MAX_ISSUE_TEXT, Issue


def test_critique_schema_is_generated_from_the_struct() -> None:
    schema = critique_json_schema()
    issues = schema["properties"]["issues"]
    issue = issues["items"]
    assert set(issue["required"]) == set(Issue.__struct_fields__) == {"severity", "quote", "reason", "fix"}
    assert issue["properties"]["severity"]["enum"] == ["critical", "major", "minor"]
    assert issue["properties"]["quote"]["maxLength"] == MAX_ISSUE_TEXT
    assert issues["maxItems"] == MAX_ISSUES
    assert schema["required"] == ["issues"]
    assert "$ref" not in json.dumps(schema)  # inlined: grammar converters ignore $ref
    # A reply that follows the schema validates against the same Struct; one that breaks its bounds does not.
    reply = b'{"issues": [{"severity": "major", "quote": "x", "reason": "y", "fix": "z"}]}'
    assert msgspec.json.decode(reply, type=CritiqueReport).issues[0].severity == "major"
    too_long = json.dumps(
        {"issues": [{"severity": "minor", "quote": "q" * (MAX_ISSUE_TEXT + 1), "reason": "", "fix": ""}]}
    )
    with pytest.raises(msgspec.ValidationError, match="length <= 100"):
        msgspec.json.decode(too_long, type=CritiqueReport)


def test_question_schema_bounds_the_plan_and_replies_are_validated() -> None:
    schema = question_json_schema()
    assert schema["properties"]["questions"]["maxItems"] == MAX_QUESTIONS
    assert parse_plan(' {"questions": ["Is 3 + 4 = 7?"]} ').questions == ["Is 3 + 4 = 7?"]
    with pytest.raises(msgspec.ValidationError):
        parse_plan(json.dumps({"questions": ["q"] * (MAX_QUESTIONS + 1)}))


def test_a_fenced_reply_with_raw_control_characters_still_parses() -> None:
    reply = '```json\n{"issues": [{"severity": "minor", "quote": "a\tb", "reason": "r", "fix": "f"}]}\n```'
    assert parse_report(reply).issues[0].quote == "a b"
