"""The sql scenario's questions: templates filled with values drawn from the shop database by the run seed,
each question with its gold query (held out) and the shape its wording asks for."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from typing import Any

PER_TEMPLATE = 4
"""Tasks per question template (10 templates: 40 tasks)."""
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]

Template = Callable[[random.Random, sqlite3.Connection], list[tuple[str, str]]]


def _values(db: sqlite3.Connection, sql: str) -> list[Any]:
    return [row[0] for row in db.execute(sql)]


def _by_city(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    cities = rng.sample(_values(db, "SELECT DISTINCT city FROM customers ORDER BY city"), PER_TEMPLATE)
    return [(f"How many customers live in {c}?", f"SELECT COUNT(*) FROM customers WHERE city = '{c}'") for c in cities]


def _joined_in(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    # Only (year, city) pairs with someone in them: an empty gold result would pass any empty query.
    picks = [
        tuple(row) for row in db.execute("SELECT DISTINCT substr(joined, 1, 4), city FROM customers ORDER BY 1, 2")
    ]
    return [
        (
            f"List the names of the customers from {c} who joined in {y}.",
            f"SELECT name FROM customers WHERE city = '{c}' AND joined LIKE '{y}-%'",
        )
        for y, c in rng.sample(sorted(picks), PER_TEMPLATE)
    ]


def _priciest(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    categories = rng.sample(_values(db, "SELECT DISTINCT category FROM products ORDER BY 1"), PER_TEMPLATE)
    return [
        (
            f"What is the name of the most expensive product in the '{c}' category?",
            f"SELECT name FROM products WHERE category = '{c}' ORDER BY price DESC LIMIT 1",
        )
        for c in categories
    ]


def _units_sold(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    products = rng.sample(
        _values(db, "SELECT DISTINCT p.name FROM products p JOIN order_items i ON i.product_id = p.id ORDER BY 1"),
        PER_TEMPLATE,
    )
    return [
        (
            f"How many units of the product '{p}' were sold in orders that were not cancelled?",
            "SELECT SUM(i.quantity) FROM order_items i JOIN orders o ON o.id = i.order_id "
            f"JOIN products p ON p.id = i.product_id WHERE p.name = '{p}' AND o.status != 'cancelled'",
        )
        for p in products
    ]


def _revenue_by_category(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    status_sets = rng.sample([("paid",), ("shipped",), ("cancelled",), ("paid", "shipped")], PER_TEMPLATE)
    return [
        (
            f"For each product category, what is the revenue (quantity times unit price) of the orders whose "
            f"status is {' or '.join(statuses)}? Give the category and the revenue, highest revenue first.",
            "SELECT p.category, ROUND(SUM(i.quantity * p.price), 2) AS revenue FROM order_items i "
            "JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id "
            f"WHERE o.status IN ({', '.join(repr(s) for s in statuses)}) GROUP BY p.category ORDER BY revenue DESC",
        )
        for statuses in status_sets
    ]


def _frequent_buyers(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    having_some = (
        "SELECT DISTINCT c.city FROM customers c JOIN orders o ON o.customer_id = c.id "
        "GROUP BY c.id HAVING COUNT(*) >= 3 ORDER BY 1"
    )
    cities = rng.sample(_values(db, having_some), PER_TEMPLATE)
    return [
        (
            f"Which customers from {c} placed at least 3 orders? List their names.",
            "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
            f"WHERE c.city = '{c}' GROUP BY c.id HAVING COUNT(*) >= 3",
        )
        for c in cities
    ]


def _average_price(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    categories = rng.sample(_values(db, "SELECT DISTINCT category FROM products ORDER BY 1"), PER_TEMPLATE)
    return [
        (
            f"What is the average unit price of the products in the '{c}' category, rounded to 2 decimals?",
            f"SELECT ROUND(AVG(price), 2) FROM products WHERE category = '{c}'",
        )
        for c in categories
    ]


def _orders_in_month(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    months = rng.sample(_values(db, "SELECT DISTINCT substr(ordered, 1, 7) FROM orders ORDER BY 1"), PER_TEMPLATE)
    return [
        (
            f"How many orders were placed in {_MONTHS[int(m[5:]) - 1]} {m[:4]}?",
            f"SELECT COUNT(*) FROM orders WHERE ordered LIKE '{m}-%'",
        )
        for m in months
    ]


def _top_spenders(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    sizes = rng.sample([2, 3, 4, 5, 6, 7], PER_TEMPLATE)
    return [
        (
            f"Who are the {k} customers who spent the most on orders that were not cancelled? Give each name "
            "and the total spent (quantity times unit price), biggest spender first.",
            "SELECT c.name, ROUND(SUM(i.quantity * p.price), 2) AS spent FROM customers c "
            "JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id "
            "JOIN products p ON p.id = i.product_id WHERE o.status != 'cancelled' "
            f"GROUP BY c.id ORDER BY spent DESC LIMIT {k}",
        )
        for k in sizes
    ]


def _category_buyers(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    categories = rng.sample(_values(db, "SELECT DISTINCT category FROM products ORDER BY 1"), PER_TEMPLATE)
    return [
        (
            f"How many different customers bought at least one product of the '{c}' category?",
            "SELECT COUNT(DISTINCT o.customer_id) FROM orders o JOIN order_items i ON i.order_id = o.id "
            f"JOIN products p ON p.id = i.product_id WHERE p.category = '{c}'",
        )
        for c in categories
    ]


TEMPLATES: list[tuple[Template, dict[str, Any]]] = [
    # each template with the shape its wording asks for: columns, and "desc_last" for "highest ... first"
    (_by_city, {"columns": 1}),
    (_joined_in, {"columns": 1}),
    (_priciest, {"columns": 1}),
    (_units_sold, {"columns": 1}),
    (_revenue_by_category, {"columns": 2, "order": "desc_last"}),
    (_frequent_buyers, {"columns": 1}),
    (_average_price, {"columns": 1}),
    (_orders_in_month, {"columns": 1}),
    (_top_spenders, {"columns": 2, "order": "desc_last"}),
    (_category_buyers, {"columns": 1}),
]
