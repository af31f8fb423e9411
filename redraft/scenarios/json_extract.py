"""Extract fields from short seeded texts into a JSON object that must validate against a JSON Schema.

Each task is a short text (a contact note, an order, an event) generated from
templates, the JSON Schema the answer must satisfy, and the gold value of every
field. The check gives one result per field, so a candidate's score is the share
of correct fields: a field is correct when the object is valid against the
schema at that field and its value equals the gold one (strings compared
case-insensitively after trimming; numbers by value).

Invariants: the task list depends only on the seed; `check` never raises for
bad text; feedback names the wrong fields and the schema's complaint, never a
gold value.
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
from redraft.scenarios.base import Scenario, scenario

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


def check_fields(obj: Any, schema: dict[str, Any], gold: dict[str, Any]) -> list[CheckResult]:
    """One result per gold field: schema-valid at that field and equal to the gold value."""
    if not isinstance(obj, dict):
        kind = "nothing parsable" if obj is None else f"a JSON {type(obj).__name__}"
        detail = f"expected one JSON object, found {kind}; answer with the object in a ```json block"
        return [CheckResult(name="json_object", passed=False, score=0.0, detail=detail)]
    schema_errors: dict[str, str] = {}
    for error in Draft202012Validator(schema).iter_errors(obj):
        field = str(error.path[0]) if error.path else None
        if field is None and error.validator == "required":
            # "'x' is a required property": attribute it to the missing field.
            field = next((f for f in gold if f not in obj), None)
        if field is not None:
            schema_errors.setdefault(field, error.message)
    results = []
    for field, expected in gold.items():
        name = f"field:{field}"
        if field not in obj:
            results.append(CheckResult(name=name, passed=False, score=0.0, detail=f"{field!r} is missing"))
        elif field in schema_errors:
            detail = f"{field!r} breaks the schema: {schema_errors[field]}"[:300]
            results.append(CheckResult(name=name, passed=False, score=0.0, detail=detail))
        elif not _same(obj[field], expected):
            detail = f"{field!r} has the wrong value; re-read the text"
            results.append(CheckResult(name=name, passed=False, score=0.0, detail=detail))
        else:
            results.append(CheckResult(name=name, passed=True, score=1.0, detail=f"{field!r} is correct"))
    return results


@scenario("json_extract")
class JsonExtract(Scenario):
    """Seeded short texts; extract the fields into a JSON object valid against the task's schema."""

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
                reference={"schema": schema, "gold": gold},
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
        return check_fields(extract_object(text), task.reference["schema"], task.reference["gold"])
