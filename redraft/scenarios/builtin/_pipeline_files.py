"""The messy input files of a pipeline case: parts of a clean order table written as CSV, JSON and XML, quirks in.

Each part's writer gets its orders (ids, customers, dates, quantities already drawn), draws what it owns
(the amounts, and how each one is written), writes the bytes, and returns the orders with their gold
amounts and each injected quirk's `Footprint`: the gold cells the quirk makes hard to read, and the keys
a solution that missed it would write. The grade reads the footprints to say which quirks were handled.

Invariants: every injected quirk leaves a footprint of at least one cell; a hidden quirk touches no
record before `HIDDEN_AFTER` in its file, a visible one touches one of the first `VISIBLE_WITHIN`; an
amount in another currency is never within a hundredth of a cent of a rounding tie, so any sound
conversion lands on the gold cent.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal, get_args
from xml.sax.saxutils import escape

Quirk = Literal["csv_date_formats", "thousands_separator", "json_near_duplicates", "xml_mixed_units", "lying_extension"]
QUIRKS: tuple[Quirk, ...] = get_args(Quirk)
HIDEABLE: tuple[Quirk, ...] = ("csv_date_formats", "thousands_separator", "json_near_duplicates", "xml_mixed_units")
"""Quirks that can sit past the first records of their file (a lying extension shows at the first byte)."""
Format = Literal["csv", "json", "xml"]

HIDDEN_AFTER = 50
"""A hidden quirk touches only records from this index on (0-based data rows, array items, elements)."""
VISIBLE_WITHIN = 10
"""A quirk that is not hidden touches at least one of its file's first this many records."""
VALUE_COLUMNS = ("customer", "order_date", "amount_eur", "quantity")
"""The output columns besides the key, whose cells a footprint names."""

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
OTHER_DATE_FORMATS = ("dotted", "day_month_name", "compact")
"""How `csv_date_formats` writes a date besides ISO: 05.03.2024, 05 Mar 2024, 20240305 (never a slashed
date: 05/03/2024 would be ambiguous, and the task must have one right answer)."""
RATE_RANGES = {"USD": (8800, 9600), "GBP": (11400, 12000), "CHF": (10200, 10800)}
"""Euros per unit of each currency `xml_mixed_units` may use, in ten-thousandths."""


@dataclass(frozen=True)
class Footprint:
    """What one quirk did to a case, for the grade: handled means every cell right and no decoy key written."""

    cells: frozenset[tuple[str, str]] = frozenset()
    """(order_id, column) of every gold cell the quirk touched; columns from `VALUE_COLUMNS` only."""
    decoy_keys: frozenset[str] = frozenset()
    """Keys (stripped) that a solution which missed the quirk writes: a near-duplicate's variant id."""

    def __or__(self, other: Footprint) -> Footprint:
        return Footprint(cells=self.cells | other.cells, decoy_keys=self.decoy_keys | other.decoy_keys)


@dataclass(frozen=True)
class Order:
    """One order of the clean table, by customer id (the name comes from the customer list)."""

    order_id: str
    customer_id: str
    day: date
    quantity: int
    cents: int = 0
    """The total in euro cents; set by the part that writes the order."""


@dataclass(frozen=True)
class Part:
    """One order file as written: its orders with their gold amounts, its bytes, its quirks' footprints."""

    orders: tuple[Order, ...]
    data: bytes
    records: int
    """How many order records the file holds (near-duplicates included)."""
    footprints: dict[Quirk, Footprint]


def positions(rng: random.Random, n: int, share: float, *, hidden: bool) -> frozenset[int]:
    """About ``share`` of the record indices ``0..n-1`` (at least 3), from `HIDDEN_AFTER` on when ``hidden``,
    else with one among the first `VISIBLE_WITHIN`."""
    pool = range(HIDDEN_AFTER if hidden else 0, n)
    if not pool:
        return frozenset()
    chosen = set(rng.sample(pool, min(len(pool), max(3, round(share * len(pool))))))
    if not hidden:
        chosen.add(rng.randrange(min(n, VISIBLE_WITHIN)))
    return frozenset(chosen)


def cells(order_ids: Iterable[str], columns: Sequence[str]) -> frozenset[tuple[str, str]]:
    return frozenset((key, column) for key in order_ids for column in columns)


def euros(cents: int, *, thousands: bool = False) -> str:
    """12.50, or 1,234.50 with a thousands separator."""
    whole = f"{cents // 100:,}" if thousands else str(cents // 100)
    return f"{whole}.{cents % 100:02d}"


def draw_cents(rng: random.Random, *, big: bool) -> int:
    """An order total: 5.00 to 999.99 euros, or 1,000.00 to 4,999.99 when ``big``."""
    return rng.randint(100_000, 499_999) if big else rng.randint(500, 99_999)


def date_text(day: date, style: str) -> str:
    if style == "dotted":
        return f"{day.day:02d}.{day.month:02d}.{day.year}"
    if style == "day_month_name":
        return f"{day.day:02d} {MONTHS[day.month - 1]} {day.year}"
    if style == "compact":
        return f"{day.year}{day.month:02d}{day.day:02d}"
    return day.isoformat()


def csv_bytes(header: Sequence[str], rows: Iterable[Sequence[object]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


def csv_part(rng: random.Random, orders: Sequence[Order], quirks: set[Quirk], hidden: set[Quirk]) -> Part:
    """``orders.csv``: ISO dates unless `csv_date_formats` mixes in one or two other formats; amounts in euros,
    with a thousands separator in those of 1,000 or more under `thousands_separator`."""
    n = len(orders)
    big = positions(rng, n, 0.3, hidden="thousands_separator" in hidden)
    odd: list[int] = []
    if "csv_date_formats" in quirks:
        odd = sorted(positions(rng, n, 0.35, hidden="csv_date_formats" in hidden))
        rng.shuffle(odd)
    formats = rng.sample(OTHER_DATE_FORMATS, rng.choice((1, 2)))
    style = {i: formats[j % len(formats)] for j, i in enumerate(odd)}  # every chosen format used at least once
    separated = "thousands_separator" in quirks
    written, rows = [], []
    for i, order in enumerate(orders):
        order = dataclasses.replace(order, cents=draw_cents(rng, big=i in big))
        written.append(order)
        day = date_text(order.day, style.get(i, "iso"))
        rows.append([order.order_id, order.customer_id, day, euros(order.cents, thousands=separated), order.quantity])
    footprints: dict[Quirk, Footprint] = {}
    if odd:
        footprints["csv_date_formats"] = Footprint(cells=cells((written[i].order_id for i in odd), ["order_date"]))
    if separated:
        touched = (o.order_id for o in written if o.cents >= 100_000)
        footprints["thousands_separator"] = Footprint(cells=cells(touched, ["amount_eur"]))
    data = csv_bytes(["order_id", "customer_id", "order_date", "amount_eur", "quantity"], rows)
    return Part(orders=tuple(written), data=data, records=n, footprints=footprints)


def json_part(
    rng: random.Random, orders: Sequence[Order], *, near_duplicates: bool, hidden: bool, as_csv: bool
) -> Part:
    """``orders_web.json``: an array of records with a timestamp and a float total; under
    `json_near_duplicates`, some orders a second time, written a little differently. Written as CSV
    when ``as_csv`` (the file whose extension lies)."""
    written = [dataclasses.replace(o, cents=draw_cents(rng, big=rng.random() < 0.2)) for o in orders]
    records: list[dict[str, object]] = [
        {
            "id": o.order_id,
            "customer": o.customer_id,
            "placed_at": f"{o.day.isoformat()}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}",
            "total_eur": o.cents / 100,
            "qty": o.quantity,
        }
        for o in written
    ]
    footprints: dict[Quirk, Footprint] = {}
    if near_duplicates:
        records, twice = with_near_duplicates(rng, records, hidden=hidden)
        decoys = {str(r["id"]).strip() for r in records} - {o.order_id for o in written}
        touched = cells((written[i].order_id for i in twice), VALUE_COLUMNS)
        footprints["json_near_duplicates"] = Footprint(cells=touched, decoy_keys=frozenset(decoys))
    if as_csv:
        header = ["id", "customer", "placed_at", "total_eur", "qty"]
        data = csv_bytes(header, ([r[k] for k in header] for r in records))
    else:
        data = ("[\n" + ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in records) + "\n]\n").encode()
    return Part(orders=tuple(written), data=data, records=len(records), footprints=footprints)


def with_near_duplicates(
    rng: random.Random, records: list[dict[str, object]], *, hidden: bool
) -> tuple[list[dict[str, object]], list[int]]:
    """``records`` with a variant of about one in twelve inserted after its original (from index
    `HIDDEN_AFTER` on when ``hidden``; else the first pair within the first records), and the indices of
    the originals."""
    n = len(records)
    twice = rng.sample(range(n), max(2, round(n / 12)))
    if not hidden:
        twice[0] = rng.randrange(min(n, VISIBLE_WITHIN // 2))
        twice = list(dict.fromkeys(twice))
    placed: list[tuple[float, int, dict[str, object]]] = [(float(i), 0, r) for i, r in enumerate(records)]
    for j, i in enumerate(twice):
        # A variant at a place past index HIDDEN_AFTER has more than HIDDEN_AFTER originals before it.
        at = i + 0.5 if not hidden and j == 0 else rng.uniform(max(i, HIDDEN_AFTER if hidden else i) + 0.1, n)
        placed.append((at, 1, variant(rng, records[i])))
    placed.sort(key=lambda p: (p[0], p[1]))
    return [r for _, _, r in placed], twice


def variant(rng: random.Random, record: dict[str, object]) -> dict[str, object]:
    """The same order written a little differently: its id in lower case or padded, or the date without
    its time; and perhaps the total or the quantity as a string, the keys in another order."""
    copy = dict(record)
    order_id, placed_at = str(record["id"]), str(record["placed_at"])
    change = rng.choice(("id_lower", "id_padded", "date_only"))
    if change == "id_lower":
        copy["id"] = order_id.lower()
    elif change == "id_padded":
        copy["id"] = f" {order_id} "
    else:
        copy["placed_at"] = placed_at.split("T")[0]
    if rng.random() < 0.5:
        copy["total_eur"] = f"{record['total_eur']:.2f}"
    if rng.random() < 0.3:
        copy["qty"] = str(record["qty"])
    if rng.random() < 0.5:
        copy = dict(reversed(list(copy.items())))
    return copy


def xml_part(rng: random.Random, orders: Sequence[Order], *, mixed_units: bool, hidden: bool) -> Part:
    """``orders_partner.xml``: one ``<order>`` element a line, the amount in euros; under `xml_mixed_units`
    some in cents and some in another currency, converted by the rates stated after the orders."""
    odd = sorted(positions(rng, len(orders), 0.3, hidden=hidden)) if mixed_units else []
    rng.shuffle(odd)
    currencies = rng.sample(sorted(RATE_RANGES), rng.choice((1, 2)))
    rates = {c: rng.randint(*RATE_RANGES[c]) for c in currencies}
    units = ["cents", *currencies]
    unit = {i: units[j % len(units)] for j, i in enumerate(odd)}  # cents and every currency at least once
    written, lines = [], []
    for i, order in enumerate(orders):
        cents, amount = xml_amount(rng, unit.get(i, "EUR"), rates)
        order = dataclasses.replace(order, cents=cents)
        written.append(order)
        lines.append(
            f'    <order id="{order.order_id}"><customer>{order.customer_id}</customer>'
            f"<date>{order.day.isoformat()}</date>{amount}<quantity>{order.quantity}</quantity></order>"
        )
    rate_lines = [f'    <rate from="{c}" to="EUR" value="{rates[c] / 10_000:.4f}"/>' for c in currencies]
    if any(u in currencies for u in unit.values()):
        lines += ["  </orders>", "  <rates>", *rate_lines, "  </rates>"]
    else:
        lines.append("  </orders>")
    text = '<?xml version="1.0" encoding="UTF-8"?>\n<partner_orders>\n  <orders>\n' + "\n".join(lines)
    footprints: dict[Quirk, Footprint] = {}
    if odd:
        footprints["xml_mixed_units"] = Footprint(cells=cells((written[i].order_id for i in odd), ["amount_eur"]))
    data = (text + "\n</partner_orders>\n").encode()
    return Part(orders=tuple(written), data=data, records=len(written), footprints=footprints)


def xml_amount(rng: random.Random, unit: str, rates: dict[str, int]) -> tuple[int, str]:
    """The gold cents of an amount and its ``<amount>`` element, in euros, euro cents or a currency of ``rates``."""
    if unit == "EUR":
        cents = draw_cents(rng, big=rng.random() < 0.2)
        return cents, f'<amount currency="EUR">{euros(cents)}</amount>'
    if unit == "cents":
        cents = draw_cents(rng, big=rng.random() < 0.2)
        return cents, f'<amount currency="EUR" unit="cents">{cents}</amount>'
    while True:
        foreign = draw_cents(rng, big=rng.random() < 0.2)
        # foreign cents x rate in ten-thousandths = euro cents x 10_000; keep clear of a half cent.
        product = foreign * rates[unit]
        if abs(product % 10_000 - 5_000) > 100:
            return (product + 5_000) // 10_000, f'<amount currency="{unit}">{euros(foreign)}</amount>'


def customers_file(customers: Sequence[tuple[str, str]], content: Format) -> bytes:
    """The customer list (id, name) as CSV, a JSON array or XML."""
    if content == "csv":
        return csv_bytes(["customer_id", "name"], customers)
    if content == "json":
        records = [{"customer_id": c, "name": name} for c, name in customers]
        return (json.dumps(records, ensure_ascii=False, indent=1) + "\n").encode()
    lines = [
        f"  <customer><customer_id>{c}</customer_id><name>{escape(name)}</name></customer>" for c, name in customers
    ]
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<customers>\n' + "\n".join(lines) + "\n</customers>\n").encode()
