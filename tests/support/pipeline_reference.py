"""A reference solution of the pipeline cases: standard library only, every quirk handled, no gold read.

It does what a careful program written after inspecting the files would do: sniff each file's real
format from its first byte (an extension may lie), read every file into records, tell customers from
orders by their fields, read the dates in each format a file uses, drop thousands separators, convert
XML amounts in cents or in another currency by the rates the file states, keep one record per order id
(ids compared stripped and upper-cased), join the customer names, sort by date then id.

`solve` takes the files' bytes and returns ``output.csv``'s. ``skip`` names quirks to leave unhandled,
one fix each, for tests that a grade notices: with every quirk skipped it is the naive solution (reads
ISO dates only, trusts extensions, no dedup, every amount in euros). Run as a program, it is a
candidate's program: ``python pipeline_reference.py [DIR]`` reads DIR (default: the working directory)
and writes DIR/output.csv.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import xml.etree.ElementTree as ET
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path

EVERY_QUIRK = frozenset(
    {"csv_date_formats", "thousands_separator", "json_near_duplicates", "xml_mixed_units", "lying_extension"}
)
HEADER = ["order_id", "customer", "order_date", "amount_eur", "quantity"]
FIELDS = {
    "id": ("order_id", "id"),
    "customer": ("customer_id", "customer"),
    "date": ("order_date", "placed_at", "date"),
    "amount": ("amount_eur", "total_eur", "amount"),
    "quantity": ("quantity", "qty"),
}
MONTHS = {
    m: i for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)
}
DATES = [
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:T[\d:]+)?"), lambda m: (m[1], m[2], m[3])),
    (re.compile(r"(\d{2})\.(\d{2})\.(\d{4})"), lambda m: (m[3], m[2], m[1])),
    (re.compile(r"(\d{2}) ([A-Z][a-z]{2}) (\d{4})"), lambda m: (m[3], f"{MONTHS[m[2]]:02d}", m[1])),
    (re.compile(r"(\d{4})(\d{2})(\d{2})"), lambda m: (m[1], m[2], m[3])),
]


def sniff(data: bytes) -> str:
    first = data.lstrip()[:1]
    return "xml" if first == b"<" else "json" if first in (b"[", b"{") else "csv"


def records(name: str, data: bytes, skip: frozenset[str]) -> list[dict[str, str]]:
    """The file's records as flat dicts of strings (an XML element's attributes and children, ``amount@unit``
    for a child's attribute); an unreadable file has none."""
    kind = name.rsplit(".", 1)[-1] if "lying_extension" in skip else sniff(data)
    text = data.decode("utf-8")
    try:
        if kind == "json":
            return [{k: str(v) for k, v in item.items()} for item in json.loads(text)]
        if kind == "xml":
            return [
                _flat(element) for element in ET.fromstring(text).iter() if element.tag in {"order", "customer", "rate"}
            ]
        return list(csv.DictReader(io.StringIO(text, newline="")))
    except (ValueError, ET.ParseError, AttributeError):
        return []


def _flat(element: ET.Element) -> dict[str, str]:
    flat = dict(element.attrib)
    for child in element:
        flat[child.tag] = (child.text or "").strip()
        flat.update({f"{child.tag}@{k}": v for k, v in child.attrib.items()})
    return flat


def field(record: dict[str, str], name: str) -> str | None:
    return next((record[k] for k in FIELDS[name] if record.get(k) is not None), None)


def iso_date(text: str, skip: frozenset[str]) -> str:
    patterns = DATES[:1] if "csv_date_formats" in skip else DATES
    for pattern, parts in patterns:
        match = pattern.fullmatch(text.strip())
        if match:
            return "-".join(parts(match))
    return text


def euros(record: dict[str, str], rates: dict[str, Decimal], skip: frozenset[str]) -> str:
    text = field(record, "amount") or ""
    if "thousands_separator" not in skip:
        text = text.replace(",", "")
    try:
        amount = Decimal(text.strip())
    except InvalidOperation:
        return text
    if "xml_mixed_units" not in skip:
        if record.get("amount@unit") == "cents":
            amount /= 100
        amount *= rates.get(record.get("amount@currency", "EUR"), Decimal(1))
    return str(amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def solve(files: dict[str, bytes], *, skip: frozenset[str] = frozenset()) -> bytes:
    """``output.csv`` for the input ``files`` (name -> bytes), leaving the quirks in ``skip`` unhandled."""
    every = [r for name, data in sorted(files.items()) for r in records(name, data, skip)]
    names = {r["customer_id"].strip(): r["name"] for r in every if "name" in r and "customer_id" in r}
    rates = {r["from"]: Decimal(r["value"]) for r in every if "from" in r and "value" in r}
    rows, seen = [], set()
    for record in every:
        order_id = field(record, "id")
        if order_id is None or "name" in record:
            continue
        if "json_near_duplicates" not in skip:
            order_id = order_id.strip().upper()
            if order_id in seen:
                continue
            seen.add(order_id)
        customer = names.get((field(record, "customer") or "").strip(), "")
        day = iso_date(field(record, "date") or "", skip)
        rows.append([order_id, customer, day, euros(record, rates, skip), (field(record, "quantity") or "").strip()])
    rows.sort(key=lambda row: (row[2], row[0]))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def naive(files: dict[str, bytes]) -> bytes:
    """The solution that handles no quirk: ISO dates only, extensions trusted, no dedup, amounts as written."""
    return solve(files, skip=EVERY_QUIRK)


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    inputs = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != "output.csv"}
    (folder / "output.csv").write_bytes(solve(inputs))
