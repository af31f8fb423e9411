"""Seeded short documents of numbered sentences, each with a question that the document answers, or does not.

`make_case` draws a subject of one of four kinds (a bridge, a public library's rules, a bird's profile, a
town festival) and writes 10 to 13 sentences about it: the subject's facts, each a sentence naming the subject
in full; two or three facts of a second subject of the same kind (a distractor, named in full too, so that a
sentence never means two things, and half the time holding an asked fact of its own); and a neutral sentence
or two. The question asks for one fact of the subject (difficulty 1) or two (difficulty 2); at difficulty 3 it
asks for a fact the document leaves out, which the distractor holds of its own subject: the document does
not say.

What the case knows beyond its text (`Case.support`, the sentences that answer the question) is for the
tests that build right answers; a task never carries it, and no grade reads it.

Invariants: a case depends only on (seed, difficulty); sentence ids run S1 to Sn in order; every sentence of
a fact names its subject in full; no sentence holds a double quote, a square bracket or a line break, and
each ends with a full stop; no two sentences are the same.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

Draw = Callable[[random.Random], dict[str, str]]


@dataclass(frozen=True)
class Fact:
    """One fact a kind of subject has: the sentence that states it, and the question that asks for it."""

    key: str
    sentence: str
    """A template over the subject's values (``{name}`` and the kind's own)."""
    question: str


@dataclass(frozen=True)
class Kind:
    """A kind of subject: how its values are drawn, its facts, and the neutral sentences about its setting."""

    name: str
    draw: Draw
    facts: tuple[Fact, ...]
    neutral: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    """A document of numbered sentences and a question about it."""

    kind: str
    difficulty: int
    subject: str
    """The name of the subject the question asks about."""
    sentences: tuple[str, ...]
    question: str
    support: tuple[int, ...]
    """The ids (from 1) of the sentences that answer the question; none when the document does not say."""


_TOWNS = ("Brenmoor", "Kessford", "Alderwick", "Harlow", "Tamsby", "Orrington", "Fenlow", "Castleby", "Wyndham")
_PEOPLE = (
    "Agnes Thorpe",
    "Walter Lindqvist",
    "Mina Osei",
    "Henrik Vale",
    "Clara Dunmore",
    "Tomas Brandt",
    "Edith Carrow",
    "Jonas Pell",
    "Ruth Abernathy",
    "Samuel Okafor",
)
_MONTHS = ("March", "April", "May", "June", "July", "August", "September", "October")


def _pick(rng: random.Random, options: tuple[str, ...]) -> str:
    return options[rng.randrange(len(options))]


def _bridge(rng: random.Random) -> dict[str, str]:
    opened = rng.randrange(1850, 1931)
    closed = opened + rng.randrange(40, 80)
    return {
        "name": f"{_pick(rng, ('Harlow', 'Tessel', 'Kingsway', 'Marrow', 'Elmstead', 'Corran'))} Bridge",
        "town": _pick(rng, _TOWNS),
        "river": f"River {_pick(rng, ('Tessel', 'Wend', 'Ouse', 'Carr', 'Lune', 'Mell'))}",
        "opened": str(opened),
        "designer": _pick(rng, _PEOPLE),
        "length": str(rng.randrange(12, 90) * 10),
        "spans": str(rng.randrange(3, 13)),
        "material": _pick(rng, ("sandstone", "cast iron", "riveted steel", "reinforced concrete", "granite")),
        "closed": str(closed),
        "reason": _pick(rng, ("flood damage to two piers", "a barge striking a pier", "corrosion in the deck")),
        "reopened": str(closed + rng.randrange(1, 5)),
        "crossings": f"{rng.randrange(2, 40) * 1000:,}",
    }


_BRIDGE = Kind(
    "bridge",
    _bridge,
    (
        Fact("place", "The {name} crosses the {river} at {town}.", "Which river does the {name} cross?"),
        Fact("opened", "The {name} opened to traffic in {opened}.", "When did the {name} open to traffic?"),
        Fact("designer", "The {name} was designed by the engineer {designer}.", "Who designed the {name}?"),
        Fact("length", "The {name} is {length} metres long and rests on {spans} spans.", "How long is the {name}?"),
        Fact("material", "The {name} is built of {material}.", "What is the {name} built of?"),
        Fact("closed", "The {name} was closed in {closed} after {reason}.", "Why was the {name} closed?"),
        Fact("reopened", "The {name} reopened in {reopened}.", "When did the {name} reopen?"),
        Fact(
            "traffic", "About {crossings} vehicles cross the {name} each day.", "How much traffic crosses the {name}?"
        ),
    ),
    ("{town} grew as a market town around its river crossing.", "The {river} is tidal below {town}."),
)


def _library(rng: random.Random) -> dict[str, str]:
    opens = rng.randrange(8, 11)
    return {
        "name": f"{_pick(rng, _TOWNS)} {_pick(rng, ('Public', 'Central', 'Community'))} Library",
        "town": _pick(rng, _TOWNS),
        "days": str(rng.choice((14, 21, 28))),
        "renewals": _pick(rng, ("two", "three", "four", "five")),
        "fee": str(rng.randrange(1, 9) * 5),
        "opens": f"{opens}:00",
        "closes": f"{opens + rng.randrange(8, 12)}:00",
        "card": str(rng.randrange(5, 31)),
        "founded": str(rng.randrange(1870, 1990)),
        "founder": _pick(rng, _PEOPLE),
        "limit": str(rng.randrange(6, 31)),
    }


_LIBRARY = Kind(
    "library",
    _library,
    (
        Fact(
            "loan",
            "Books from the {name} may be borrowed for {days} days.",
            "For how long may books be borrowed from the {name}?",
        ),
        Fact(
            "renewals",
            "A loan from the {name} can be renewed {renewals} times.",
            "How many times can a loan from the {name} be renewed?",
        ),
        Fact(
            "fee",
            "The {name} charges a late fee of {fee} cents a day for each item.",
            "What late fee does the {name} charge?",
        ),
        Fact(
            "hours",
            "On weekdays the {name} opens at {opens} and closes at {closes}.",
            "What are the {name}'s weekday opening hours?",
        ),
        Fact(
            "card",
            "An adult card for the {name} costs {card} euros a year.",
            "What does an adult card for the {name} cost?",
        ),
        Fact("founded", "The {name} was founded in {founded} by {founder}.", "Who founded the {name}?"),
        Fact(
            "limit",
            "A member of the {name} may hold at most {limit} items at once.",
            "How many items may a member of the {name} hold at once?",
        ),
    ),
    ("Children under twelve need a parent to sign for their first card.", "Lost cards are replaced at the desk."),
)


def _bird(rng: random.Random) -> dict[str, str]:
    return {
        "name": f"{_pick(rng, ('copper', 'marsh', 'ridge', 'grey-tailed', 'dune', 'alder'))} "
        f"{_pick(rng, ('lark', 'finch', 'warbler', 'pipit', 'bunting'))}",
        "habitat": _pick(rng, ("reed beds", "upland heath", "coastal dunes", "wet meadows", "pine forest")),
        "region": _pick(rng, ("the northern coast", "the eastern hills", "the river valleys", "the islands")),
        "food": _pick(rng, ("seeds and small beetles", "midges and spiders", "grass seeds", "berries and snails")),
        "grams": str(rng.randrange(12, 46)),
        "years": str(rng.randrange(2, 9)),
        "month": _pick(rng, _MONTHS),
        "eggs": str(rng.randrange(3, 7)),
        "predator": _pick(rng, ("sparrowhawks", "weasels", "stoats", "kestrels", "foxes")),
        "pairs": f"{rng.randrange(3, 90) * 100:,}",
        "survey": str(rng.randrange(1995, 2024)),
    }


_BIRD = Kind(
    "bird",
    _bird,
    (
        Fact("habitat", "The {name} nests in {habitat} across {region}.", "Where does the {name} nest?"),
        Fact("food", "The {name} feeds mainly on {food}.", "What does the {name} feed on?"),
        Fact("weight", "An adult {name} weighs about {grams} grams.", "How much does an adult {name} weigh?"),
        Fact("lifespan", "In the wild the {name} lives for up to {years} years.", "How long does the {name} live?"),
        Fact("breeding", "The {name} lays {eggs} eggs in {month}.", "When does the {name} lay its eggs?"),
        Fact("predator", "The main predator of the {name} is {predator}.", "What is the main predator of the {name}?"),
        Fact(
            "count",
            "A survey in {survey} counted {pairs} breeding pairs of the {name}.",
            "How many breeding pairs of the {name} were counted?",
        ),
    ),
    ("Ringing schemes have followed the region's birds for decades.", "Many small birds of {region} migrate south."),
)


def _festival(rng: random.Random) -> dict[str, str]:
    town = _pick(rng, _TOWNS)
    return {
        "name": f"{town} {_pick(rng, ('Folk', 'Lantern', 'Harvest', 'Kite', 'Film', 'Jazz'))} Festival",
        "town": town,
        "month": _pick(rng, _MONTHS),
        "first": str(rng.randrange(1950, 2016)),
        "founder": _pick(rng, _PEOPLE),
        "job": _pick(rng, ("teacher", "baker", "fiddler", "printer", "librarian")),
        "visitors": f"{rng.randrange(2, 60) * 1000:,}",
        "venue": _pick(rng, ("the old corn exchange", "the harbour green", "the abbey grounds", "the town square")),
        "length": _pick(rng, ("two", "three", "four", "five")),
        "price": str(rng.randrange(8, 41)),
    }


_FESTIVAL = Kind(
    "festival",
    _festival,
    (
        Fact("month", "The {name} takes place each year in {month}.", "In which month does the {name} take place?"),
        Fact("first", "The {name} was first held in {first}.", "When was the {name} first held?"),
        Fact("founder", "The {name} was started by {founder}, a local {job}.", "Who started the {name}?"),
        Fact(
            "visitors",
            "Last year the {name} drew about {visitors} visitors.",
            "How many visitors did the {name} draw last year?",
        ),
        Fact("venue", "Most events of the {name} are held in {venue}.", "Where are most events of the {name} held?"),
        Fact("length", "The {name} lasts {length} days.", "How many days does the {name} last?"),
        Fact(
            "price", "A day ticket for the {name} costs {price} euros.", "What does a day ticket for the {name} cost?"
        ),
    ),
    ("{town} fills its guest houses every summer.", "Volunteers run most of the town's events."),
)

KINDS = (_BRIDGE, _LIBRARY, _BIRD, _FESTIVAL)


def _question(facts: list[Fact], values: dict[str, str]) -> str:
    """The question asking for ``facts`` (one or two) of the subject."""
    asked = [fact.question.format(**values) for fact in facts]
    if len(asked) == 1:
        return asked[0][0].upper() + asked[0][1:]
    first, second = asked
    return f"{first[0].upper()}{first[1:-1]}, and {second[0].lower()}{second[1:]}"


def _other(kind: Kind, rng: random.Random, values: dict[str, str]) -> dict[str, str]:
    """The distractor's values: the same kind, another name, and (where it can) other values."""
    for _ in range(20):
        other = kind.draw(rng)
        if other["name"] != values["name"]:
            return other
    return kind.draw(rng) | {"name": f"New {values['name']}"}


def _capital(text: str) -> str:
    return text[0].upper() + text[1:]


def make_case(seed: int | str, difficulty: int) -> Case:
    """A case drawn from ``seed`` alone, at ``difficulty`` 1 (one fact asked), 2 (two) or 3 (one left out)."""
    rng = random.Random(f"cited:{seed}:{difficulty}")
    kind = KINDS[rng.randrange(len(KINDS))]
    values = kind.draw(rng)
    facts = rng.sample(kind.facts, len(kind.facts))
    asked = facts[: 2 if difficulty == 2 else 1]
    other = _other(kind, rng, values)
    trap = difficulty == 3 or rng.random() < 0.5  # the distractor holds an asked fact of its own subject
    decoys = [f for f in facts if f not in asked][:2] + (asked[:1] if trap else [])
    lines = [(_capital(f.sentence.format(**values)), difficulty != 3 and f in asked) for f in facts]
    if difficulty == 3:
        lines = lines[1:]  # the asked fact, left out
    lines += [(_capital(f.sentence.format(**other)), False) for f in decoys]
    lines += [(_capital(n.format(**values)), False) for n in kind.neutral[: rng.randrange(1, 3)]]
    rng.shuffle(lines)
    support = tuple(n for n, (_, answers) in enumerate(lines, start=1) if answers)
    sentences = tuple(text for text, _ in lines)
    return Case(kind.name, difficulty, values["name"], sentences, _question(asked, values), support)
