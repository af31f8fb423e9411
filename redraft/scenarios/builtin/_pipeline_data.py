"""A pipeline case, generated offline from a seed: a clean order table (the gold), and the messy files it hides in.

`make_case` draws the clean table first (orders, their customers, dates, totals and quantities), then
splits the orders over three files (``orders.csv``, ``orders_web.json``, ``orders_partner.xml``) beside a
customer list, and corrupts them with the difficulty's quirks (`Quirk`): 1 one quirk, 2 two, 3 three (one
hidden past the first 50 records), 4 all five (three hidden), with about 30, 70, 130 and 200 orders.
Building the table means sniffing each file's real format, parsing, joining the customer names,
deduplicating, converting the amounts to euros and the dates to ISO, and sorting.

What the loop may see is the `Contract` (columns, types, key, order, the example rows) and the files'
names and sizes (`prompt_text`); the rest of a `PipelineCase` (``gold_rows``, ``footprints``, which
quirks were injected and hidden) is for the held-out grade only.

Invariants: a case depends only on (seed, difficulty); the examples are gold rows that no quirk but a
lying extension touched (they show the format, not a quirk's fix), and the prompt names no other gold
key; the files stay under `MAX_FILES_BYTES`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Literal

from redraft.scenarios.builtin._pipeline_files import (
    HIDDEN_AFTER,
    HIDEABLE,
    QUIRKS,
    VALUE_COLUMNS,
    Footprint,
    Format,
    Order,
    Part,
    Quirk,
    cells,
    csv_bytes,
    csv_part,
    customers_file,
    euros,
    json_part,
    xml_part,
)

__all__ = [
    "QUIRKS",
    "CellType",
    "Column",
    "Contract",
    "Footprint",
    "PipelineCase",
    "Quirk",
    "Row",
    "make_case",
    "prompt_text",
]

CellType = Literal["str", "int", "float", "date"]
Row = tuple[str, ...]
"""One table row: each cell as written in ``output.csv``, in the contract's column order."""
TYPE_WORDS: dict[CellType, str] = {"str": "text", "int": "integer", "float": "decimal number", "date": "date"}
"""How the prompt and the feedback name each cell type."""

LEVELS = {1: (1, 0, (26, 34)), 2: (2, 0, (60, 80)), 3: (3, 1, (120, 140)), 4: (5, 3, (190, 210))}
"""Difficulty -> (quirks, hidden quirks, range of the number of orders)."""
MAX_FILES_BYTES = 64 * 1024
HIDDEN_FILE_ORDERS = HIDDEN_AFTER + 12
"""A file that holds a hidden quirk has at least this many records, so the quirk has room past the first 50."""
LIARS: tuple[tuple[str, Format], ...] = (
    ("customers.csv", "json"),
    ("customers.csv", "xml"),
    ("customers.json", "csv"),
    ("orders_web.json", "csv"),
)
"""The files `lying_extension` may write: a name, and the format its content really has."""
_FILE_OF: dict[Quirk, str] = {
    "csv_date_formats": "csv",
    "thousands_separator": "csv",
    "json_near_duplicates": "json",
    "xml_mixed_units": "xml",
}
_FIRST = ["Mia", "Tom", "Ava", "Leo", "Zoë", "Sam", "Ivy", "Max", "Nia", "Ben", "Ola", "Raj", "Léa", "Jürgen", "Søren"]
_LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Kowalski", "Müller", "O'Neill"]


@dataclass(frozen=True, kw_only=True)
class Column:
    """One output column: its name, how its cells are typed, and what it means (as the prompt states it)."""

    name: str
    type: CellType
    meaning: str
    decimals: int | None = None
    """For a ``float`` column: how many decimals each cell is written with."""


COLUMNS = (
    Column(name="order_id", type="str", meaning="the order's id: ORD- and five digits, upper case"),
    Column(
        name="customer", type="str", meaning="the name of the customer who placed the order, from the customer list"
    ),
    Column(name="order_date", type="date", meaning="the day the order was placed, written YYYY-MM-DD"),
    Column(
        name="amount_eur",
        type="float",
        decimals=2,
        meaning="the order's total in euros, with two decimals, a point and no thousands separator (as in 1234.50)",
    ),
    Column(name="quantity", type="int", meaning="the number of items ordered, a whole number"),
)


@dataclass(frozen=True, kw_only=True)
class Contract:
    """The output contract: what ``output.csv`` must hold. Everything here may be shown to the loop."""

    columns: tuple[Column, ...]
    key: str
    """The column whose value is unique and non-empty in every row."""
    order: tuple[str, ...]
    """The columns the rows are sorted by, ascending, the first one first."""
    max_rows: int
    """The number of order records in the input files: an output with more rows has invented some."""
    examples: tuple[Row, ...]
    """Rows of the right output, published in the prompt."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True, kw_only=True)
class PipelineCase:
    """One generated task: the messy files, the contract, and (held out) the gold table and what was done to it."""

    seed: int
    difficulty: int
    files: dict[str, bytes]
    """The input files by name, as they go into the sandbox's working directory."""
    contract: Contract
    gold_rows: tuple[Row, ...]
    """The clean table, in the contract's order (held out; the examples are among these)."""
    quirks: tuple[Quirk, ...]
    """The quirks injected, in `QUIRKS` order."""
    hidden: tuple[Quirk, ...]
    """The injected quirks that touch no record among the first 50 of their file."""
    footprints: dict[Quirk, Footprint] = field(default_factory=dict)
    """Per injected quirk, the gold cells it touched and the keys a solution that missed it writes."""

    @property
    def examples(self) -> tuple[Row, ...]:
        return self.contract.examples


def make_case(seed: int, difficulty: int) -> PipelineCase:
    """The case of ``seed`` at ``difficulty`` (1 to 4); the same arguments give the same bytes."""
    if difficulty not in LEVELS:
        raise ValueError(f"difficulty must be one of {sorted(LEVELS)}, not {difficulty!r}")
    rng = random.Random(f"redraft.pipeline:{seed}:{difficulty}")
    quirks, hidden = _draw_quirks(rng, difficulty)
    sizes = _draw_sizes(rng, difficulty, hidden)
    customers = _draw_customers(rng, max(10, sum(sizes) // 6))
    orders = _draw_orders(rng, sum(sizes), [c for c, _ in customers])
    liar = rng.choice(LIARS) if "lying_extension" in quirks else None
    csv_orders, json_orders, xml_orders = orders[: sizes[0]], orders[sizes[0] : -sizes[2]], orders[-sizes[2] :]
    parts = {
        "orders.csv": csv_part(rng, csv_orders, set(quirks), set(hidden)),
        "orders_web.json": json_part(
            rng,
            json_orders,
            near_duplicates="json_near_duplicates" in quirks,
            hidden="json_near_duplicates" in hidden,
            as_csv=liar == ("orders_web.json", "csv"),
        ),
        "orders_partner.xml": xml_part(
            rng, xml_orders, mixed_units="xml_mixed_units" in quirks, hidden="xml_mixed_units" in hidden
        ),
    }
    customers_name, content = liar if liar and liar[0].startswith("customers") else ("customers.csv", "csv")
    files = {name: part.data for name, part in parts.items()} | {customers_name: customers_file(customers, content)}
    footprints = _footprints(parts, liar)
    names = dict(customers)
    written = [o for part in parts.values() for o in part.orders]
    gold = tuple(sorted((_row(o, names[o.customer_id]) for o in written), key=lambda r: (r[2], r[0])))
    contract = Contract(
        columns=COLUMNS,
        key="order_id",
        order=("order_date", "order_id"),
        max_rows=sum(part.records for part in parts.values()),
        examples=_examples(rng, parts, names, footprints),
    )
    return PipelineCase(
        seed=seed,
        difficulty=difficulty,
        files=dict(sorted(files.items())),
        contract=contract,
        gold_rows=gold,
        quirks=quirks,
        hidden=hidden,
        footprints=footprints,
    )


def _draw_quirks(rng: random.Random, difficulty: int) -> tuple[tuple[Quirk, ...], tuple[Quirk, ...]]:
    count, hidden_count, _ = LEVELS[difficulty]
    chosen = set(rng.sample(QUIRKS, count))
    hidden = set(rng.sample([q for q in HIDEABLE if q in chosen], hidden_count))
    return tuple(q for q in QUIRKS if q in chosen), tuple(q for q in QUIRKS if q in hidden)


def _draw_sizes(rng: random.Random, difficulty: int, hidden: tuple[Quirk, ...]) -> tuple[int, int, int]:
    """Orders in the CSV, JSON and XML files: about 40/30/30, a file with a hidden quirk at least
    `HIDDEN_FILE_ORDERS`."""
    files = ("csv", "json", "xml")
    floor = [HIDDEN_FILE_ORDERS if any(_FILE_OF[q] == f for q in hidden) else 8 for f in files]
    total = max(rng.randint(*LEVELS[difficulty][2]), sum(floor) + 8)
    spare = total - sum(floor)
    csv_n, json_n = floor[0] + round(spare * 0.4), floor[1] + round(spare * 0.3)
    return csv_n, json_n, total - csv_n - json_n


def _draw_customers(rng: random.Random, n: int) -> list[tuple[str, str]]:
    ids = sorted(rng.sample(range(100, 1000), n))
    names = rng.sample([f"{first} {last}" for first in _FIRST for last in _LAST], n)
    return [(f"C{i}", name) for i, name in zip(ids, names, strict=True)]


def _draw_orders(rng: random.Random, n: int, customer_ids: list[str]) -> list[Order]:
    ids = rng.sample(range(10_000, 100_000), n)
    start = date(2023, 1, 1)
    return [
        Order(
            order_id=f"ORD-{i}",
            customer_id=rng.choice(customer_ids),
            day=start + timedelta(days=rng.randrange(730)),
            quantity=rng.randint(1, 20),
        )
        for i in ids
    ]


def _footprints(parts: dict[str, Part], liar: tuple[str, Format] | None) -> dict[Quirk, Footprint]:
    """Each part's footprints, and the lying file's: the customer of every order, or every cell of its orders."""
    found: dict[Quirk, Footprint] = {}
    for part in parts.values():
        for quirk, footprint in part.footprints.items():
            found[quirk] = found.get(quirk, Footprint()) | footprint
    if liar is not None:
        every = [o.order_id for part in parts.values() for o in part.orders]
        if liar[0] == "orders_web.json":
            found["lying_extension"] = Footprint(
                cells=cells((o.order_id for o in parts[liar[0]].orders), VALUE_COLUMNS)
            )
        else:
            found["lying_extension"] = Footprint(cells=cells(every, ["customer"]))
    return {q: found[q] for q in QUIRKS if q in found}


def _row(order: Order, customer: str) -> Row:
    return (order.order_id, customer, order.day.isoformat(), euros(order.cents), str(order.quantity))


def _examples(
    rng: random.Random, parts: dict[str, Part], names: dict[str, str], footprints: dict[Quirk, Footprint]
) -> tuple[Row, ...]:
    """Two or three gold rows, from different files where it can, that no quirk touched but a lying extension
    (whose fix a row cannot show): an example shows the output's format, never how a quirk is undone."""
    touched = {key for q, f in footprints.items() if q != "lying_extension" for key, _ in f.cells}
    pools = [[o for o in part.orders if o.order_id not in touched] for part in parts.values()]
    chosen = [rng.choice(pool) for pool in pools if pool]
    rng.shuffle(chosen)
    chosen = chosen[: rng.choice((2, 3))]
    rest = [o for pool in pools for o in pool if o not in chosen]
    chosen += rng.sample(rest, max(0, 2 - len(chosen)))
    return tuple(sorted((_row(o, names[o.customer_id]) for o in chosen), key=lambda r: (r[2], r[0])))


def prompt_text(case: PipelineCase) -> str:
    """The goal as the model reads it: the files (names and sizes), the output contract, the example rows."""
    contract = case.contract
    listing = "\n".join(f"- {name} ({len(data)} bytes)" for name, data in case.files.items())
    columns = "\n".join(
        f"{i}. {c.name} ({TYPE_WORDS[c.type]}{', the key' if c.name == contract.key else ''}): {c.meaning}"
        for i, c in enumerate(contract.columns, 1)
    )
    order = ", then ".join(contract.order)
    examples = csv_bytes(contract.names, contract.examples).decode()
    return (
        "Build one clean table of orders from the input files in the working directory, and write it to "
        "output.csv there.\n\n"
        f"Input files:\n{listing}\n\n"
        "output.csv is UTF-8 CSV, comma-separated, with a header row naming exactly these columns in this "
        f"order, then one row per order:\n{columns}\n\n"
        f"Every order in the input files appears exactly once ({contract.key} is unique and never empty). "
        f"Rows are sorted by {order}, ascending.\n\n"
        f"Some rows of the right output, with its header:\n{examples}\n"
        "Use Python's standard library only (csv, json, xml.etree, datetime, decimal)."
    )
