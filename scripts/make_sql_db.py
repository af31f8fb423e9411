"""Write the `sql` scenario's database, redraft/scenarios/data/shop.sqlite, from a fixed seed.

A small shop: customers, products, orders and order items, a few hundred rows
in all. The data depend only on ``SEED``, so rerunning this script rewrites the
same rows (the committed file is its output; rerun it only to change the data,
and the scenario's tasks change with it):

    python scripts/make_sql_db.py
"""

from __future__ import annotations

import datetime
import random
import sqlite3
import sys
from pathlib import Path

SEED = 20261122
OUT = Path(__file__).resolve().parent.parent / "redraft" / "scenarios" / "data" / "shop.sqlite"

SCHEMA = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT NOT NULL,
    joined DATE NOT NULL          -- YYYY-MM-DD
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price REAL NOT NULL           -- unit price in EUR
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    ordered DATE NOT NULL,        -- YYYY-MM-DD
    status TEXT NOT NULL          -- 'paid', 'shipped' or 'cancelled'
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL,
    PRIMARY KEY (order_id, product_id)
);
"""

_FIRST = ["Mia", "Tom", "Ava", "Leo", "Zoe", "Sam", "Ivy", "Max", "Nia", "Ben", "Ola", "Raj", "Eva", "Kai", "Lea"]
_LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Kowalski", "Byrne", "Rossi"]
_CITIES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Porto"]
_CATALOGUE = {
    "kitchen": ["kettle", "toaster", "chef knife", "cutting board", "teapot", "salad bowl", "frying pan"],
    "office": ["desk lamp", "notebook", "stapler", "fountain pen", "monitor stand", "paper tray"],
    "outdoor": ["tent", "sleeping bag", "headlamp", "water bottle", "camping stove", "rain jacket"],
    "audio": ["headphones", "speaker", "microphone", "turntable", "earbuds"],
}


def build(path: Path, seed: int = SEED) -> None:
    rng = random.Random(seed)
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    names = rng.sample([f"{f} {last}" for f in _FIRST for last in _LAST], 60)
    start = datetime.date(2022, 1, 1)
    customers = [
        (i + 1, name, rng.choice(_CITIES), str(start + datetime.timedelta(days=rng.randrange(3 * 365))))
        for i, name in enumerate(names)
    ]
    products: list[tuple[int, str, str, float]] = []
    for category, goods in _CATALOGUE.items():
        for good in goods:
            products.append((len(products) + 1, good, category, rng.randint(299, 24999) / 100))
    orders: list[tuple[int, int, str, str]] = []
    items: list[tuple[int, int, int]] = []
    for order_id in range(1, 181):
        customer = rng.choice(customers)
        joined = datetime.date.fromisoformat(customer[3])
        ordered = joined + datetime.timedelta(days=rng.randrange(400))
        status = rng.choices(["paid", "shipped", "cancelled"], weights=[3, 6, 1])[0]
        orders.append((order_id, customer[0], str(ordered), status))
        for product in rng.sample(products, rng.randint(1, 3)):
            items.append((order_id, product[0], rng.randint(1, 5)))
    db.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", customers)
    db.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", products)
    db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", orders)
    db.executemany("INSERT INTO order_items VALUES (?, ?, ?)", items)
    db.commit()
    db.execute("VACUUM")
    db.close()
    rows = len(customers) + len(products) + len(orders) + len(items)
    print(f"wrote {path} ({rows} rows)", file=sys.stderr)


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    build(OUT)
