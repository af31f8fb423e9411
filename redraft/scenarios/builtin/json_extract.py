"""Extract fields from short seeded texts into a JSON object that must validate against a JSON Schema.

Each task is a short text (a contact note, an order, an event) generated from
templates, the JSON Schema the answer must satisfy (``reference``, shown in the
prompt), and the gold value of every field (``gold``, held out).

Feedback (`check`) is what a user has: the reply is one JSON object, and each
field the schema names is present and valid against the schema (types, required,
enums, patterns, bounds); one result per field, so the score is the share of
valid fields. The grade (`grade`) compares each field with the gold value
(strings case-insensitively after trimming; numbers by value): its score is the
share of correct fields, and a candidate passes when every field is right.

Invariants: the task list depends only on the seed; `check` and `grade` never
raise for bad text; feedback never holds a gold value.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

from jsonschema import Draft202012Validator

from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios import Scenario, scenario, score_of

SIZE = 200
_MAX_STARTS = 20
_FENCE = re.compile(r"```[ \t]*(?:json)?[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_FIRST = ["Mia", "Tom", "Ava", "Leo", "Zoe", "Sam", "Ivy", "Max", "Nia", "Ben", "Ola", "Raj"]
_LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Kowalski"]
_CITIES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Porto", "Quebec", "Tallinn"]
_PRODUCTS = ["desk lamp", "kettle", "backpack", "notebook", "headphones", "water bottle"]
_EVENTS = ["book club", "chess night", "board game evening", "yoga class", "code review"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September"]

_STRING = {"type": "string", "minLength": 1}
_DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": sorted(properties)}


def _contact(rng: random.Random) -> tuple[str, dict[str, Any], dict[str, Any]]:
    name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    age, city, subscribed = rng.randint(19, 79), rng.choice(_CITIES), rng.random() < 0.5
    email = f"{name.split()[0].lower()}.{rng.randint(10, 99)}@example.org"
    news = "wants the monthly newsletter" if subscribed else "asked not to get any newsletter"
    text = rng.choice(
        [
            f"New member: {name}, {age} years old, lives in {city}. Reach them at {email}; {news}.",
            f"{name} ({age}) moved to {city} last spring. Email: {email}. Note: {news}.",
        ]
    )
    schema = _schema(
        {
            "name": _STRING,
            "age": {"type": "integer", "minimum": 0},
            "city": _STRING,
            "email": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+$"},
            "newsletter": {"type": "boolean"},
        }
    )
    gold = {"name": name, "age": age, "city": city, "email": email, "newsletter": subscribed}
    return text, schema, gold


def _order(rng: random.Random) -> tuple[str, dict[str, Any], dict[str, Any]]:
    order_id = f"ORD-{rng.randint(1000, 9999)}"
    product, quantity = rng.choice(_PRODUCTS), rng.randint(1, 12)
    price = rng.randint(199, 9999) / 100
    currency, shipped = rng.choice(["EUR", "USD", "GBP"]), rng.random() < 0.5
    state = "has already shipped" if shipped else "is still waiting in the warehouse"
    text = (
        f"Order {order_id}: {quantity} x {product} at {price:.2f} {currency} each. "
        f"The parcel {state}. Customer asked for gift wrapping."
    )
    schema = _schema(
        {
            "order_id": {"type": "string", "pattern": r"^ORD-\d{4}$"},
            "product": _STRING,
            "quantity": {"type": "integer", "minimum": 1},
            "unit_price": {"type": "number", "exclusiveMinimum": 0},
            "currency": {"enum": ["EUR", "USD", "GBP"]},
            "shipped": {"type": "boolean"},
        }
    )
    gold = {
        "order_id": order_id,
        "product": product,
        "quantity": quantity,
        "unit_price": price,
        "currency": currency,
        "shipped": shipped,
    }
    return text, schema, gold


def _event(rng: random.Random) -> tuple[str, dict[str, Any], dict[str, Any]]:
    title, host = rng.choice(_EVENTS), f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    month, day, seats, online = rng.randrange(len(_MONTHS)), rng.randint(1, 28), rng.randint(5, 60), rng.random() < 0.5
    where = "online, link to follow" if online else f"in person at the {rng.choice(_CITIES)} office"
    text = (
        f"Save the date: the {title} hosted by {host} takes place on {_MONTHS[month]} {day}, 2026, "
        f"{where}. There are {seats} seats."
    )
    schema = _schema(
        {
            "title": _STRING,
            "host": _STRING,
            "date": _DATE,
            "seats": {"type": "integer", "minimum": 1},
            "online": {"type": "boolean"},
        }
    )
    gold = {"title": title, "host": host, "date": f"2026-{month + 1:02d}-{day:02d}", "seats": seats, "online": online}
    return text, schema, gold


_KINDS: list[Callable[[random.Random], tuple[str, dict[str, Any], dict[str, Any]]]] = [_contact, _order, _event]


def extract_object(text: str) -> Any:
    """The JSON value in a reply: the last fenced block that parses, else the first ``{...}`` that does
    (among the first 20 opening braces).

    Returns None when nothing parses (the value itself may be any JSON type).
    """
    for body in reversed(_FENCE.findall(text)):
        try:
            return json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            continue
    decoder = json.JSONDecoder()
    # At most _MAX_STARTS tries: each may scan to the end of the text, and a reply full of braces
    # would otherwise make this quadratic.
    starts = (i for i, ch in enumerate(text) if ch == "{")
    for start in itertools.islice(starts, _MAX_STARTS):
        try:
            return decoder.raw_decode(text, start)[0]
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            continue
    return None


def _same(value: Any, gold: Any) -> bool:
    if isinstance(gold, bool) or isinstance(value, bool):
        return value is gold
    if isinstance(gold, int | float):
        return isinstance(value, int | float) and abs(value - gold) < 1e-9
    if isinstance(gold, str):
        return isinstance(value, str) and value.strip().casefold() == gold.strip().casefold()
    return bool(value == gold)


def _not_an_object(obj: Any) -> list[CheckResult]:
    kind = "nothing parsable" if obj is None else f"a JSON {type(obj).__name__}"
    detail = f"expected one JSON object, found {kind}; answer with the object in a ```json block"
    return [CheckResult(name="json_object", passed=False, score=0.0, detail=detail)]


def schema_errors(obj: dict[str, Any], schema: dict[str, Any]) -> dict[str | None, str]:
    """The schema's first complaint per top-level field (None: about the object as a whole)."""
    errors: dict[str | None, str] = {}
    for error in Draft202012Validator(schema).iter_errors(obj):
        field = str(error.path[0]) if error.path else None
        if field is None and error.validator == "required":
            field = next((f for f in schema.get("required", []) if f not in obj), None)
        errors.setdefault(field, error.message)
    return errors


def check_schema(obj: Any, schema: dict[str, Any]) -> list[CheckResult]:
    """Feedback: one result per field the schema names, present and valid against the schema (no gold)."""
    if not isinstance(obj, dict):
        return _not_an_object(obj)
    errors = schema_errors(obj, schema)
    results = []
    for field in schema.get("properties", {}):
        name = f"field:{field}"
        if field not in obj:
            results.append(CheckResult(name=name, passed=False, score=0.0, detail=f"{field!r} is missing"))
        elif field in errors:
            detail = f"{field!r} breaks the schema: {errors[field]}"[:300]
            results.append(CheckResult(name=name, passed=False, score=0.0, detail=detail))
        else:
            results.append(CheckResult(name=name, passed=True, score=1.0, detail=f"{field!r} is valid"))
    if None in errors:
        results.append(CheckResult(name="schema", passed=False, score=0.0, detail=errors[None][:300]))
    return results


def check_fields(obj: Any, schema: dict[str, Any], gold: dict[str, Any]) -> list[CheckResult]:
    """The grade's evidence: one result per gold field, schema-valid at that field and equal to the gold value."""
    if not isinstance(obj, dict):
        return _not_an_object(obj)
    errors = schema_errors(obj, schema)
    results = []
    for field, expected in gold.items():
        name = f"field:{field}"
        if field not in obj:
            results.append(CheckResult(name=name, passed=False, score=0.0, detail=f"{field!r} is missing"))
        elif field in errors:
            detail = f"{field!r} breaks the schema: {errors[field]}"[:300]
            results.append(CheckResult(name=name, passed=False, score=0.0, detail=detail))
        elif not _same(obj[field], expected):
            detail = f"{field!r} is {obj[field]!r}, the gold value is {expected!r}"[:300]
            results.append(CheckResult(name=name, passed=False, score=0.0, detail=detail))
        else:
            results.append(CheckResult(name=name, passed=True, score=1.0, detail=f"{field!r} is correct"))
    return results


@scenario("json_extract")
class JsonExtract(Scenario):
    """Seeded short texts; extract the fields into a JSON object valid against the task's schema."""

    feedback_keys = frozenset({"schema"})
    check_cost = "instant"  # a JSON parse and a schema walk
    draft_tokens = 200  # a JSON object

    def tasks(self, *, seed: int) -> Iterator[Task]:
        rng = random.Random(seed)
        for i in range(SIZE):
            text, schema, gold = _KINDS[i % len(_KINDS)](rng)
            prompt = (
                f"Extract the fields from this text into one JSON object.\n\nText: {text}\n\n"
                f"The object must validate against this JSON Schema:\n{json.dumps(schema)}"
            )
            yield Task(
                task_id=f"json_extract-{i:04d}",
                scenario=self.name,
                prompt=prompt,
                reference={"schema": schema},
                gold={"fields": gold},
            )

    def system_prompt(self) -> str:
        return (
            "Extract information from the text into JSON. Answer with exactly one JSON object in a ```json "
            "fenced block, with every property the schema requires and the types it asks for "
            "(numbers as numbers, true/false as booleans, dates as YYYY-MM-DD)."
        )

    def answer(self, text: str) -> str | None:
        obj = extract_object(text)
        return json.dumps(obj, sort_keys=True) if isinstance(obj, dict) else None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        return check_schema(extract_object(text), task.reference["schema"])

    def grade(self, task: Task, text: str) -> CheckResult | None:
        if "fields" not in task.gold:
            return None
        fields = check_fields(extract_object(text), task.reference.get("schema", {}), task.gold["fields"])
        wrong = [c.detail for c in fields if not c.passed]
        score = score_of(fields)
        return CheckResult(name="gold_fields", passed=not wrong, score=score, detail="; ".join(wrong)[:500])
