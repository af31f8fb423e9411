"""The house's import rule, read from the code: each package imports only the rooms below it.

The rule (also in docs/architecture.md): ``protocols`` imports nothing of redraft
but ``errors``; ``strategies`` builds on ``protocols``; the roles (``actors``) on
strategies, scenarios and backends; ``run`` drives the roles and writes the run
directory; the views read the run directory and nothing that runs; only the
CLI sees everything, and nothing imports the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "redraft"

ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "runtime": set(),
    "plugins": {"errors"},
    "protocols": {"errors"},
    "config": {"errors", "protocols"},
    "strategies": {"errors", "plugins", "protocols"},
    "sandbox": {"errors"},
    "backends": {"errors", "plugins", "protocols", "runtime"},
    "scenarios": {"errors", "plugins", "protocols", "sandbox"},
    "engine": {
        "errors",
        "plugins",
        "protocols",
        "config",
        "runtime",
        "strategies",
        "backends",
        "scenarios",
        "sandbox",
        "actors",
    },
    "rundir": {"errors", "protocols"},
    "views": {"errors", "protocols", "rundir"},
    "actors": {
        "errors",
        "plugins",
        "protocols",
        "config",
        "runtime",
        "strategies",
        "backends",
        "scenarios",
        "sandbox",
        "engine",
        "rundir",
    },
    "compare": {"errors", "protocols", "config", "engine", "actors", "rundir", "views"},
    "cli": {
        "errors",
        "protocols",
        "config",
        "strategies",
        "scenarios",
        "engine",
        "actors",
        "rundir",
        "views",
        "compare",
    },
    "__init__": {"protocols", "config", "engine", "actors"},
}
"""Room -> the rooms it may import from (besides itself)."""


def room_of(module: str) -> str:
    """``redraft.engine.arbiter`` -> ``actors``; ``redraft.cli`` -> ``cli``; ``redraft`` -> ``__init__``."""
    parts = module.split(".")
    if parts == ["redraft"]:
        return "__init__"
    return parts[1]


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def redraft_imports(path: Path) -> set[str]:
    """Every ``redraft...`` module ``path`` imports, at any depth (lazy imports inside functions included)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "redraft")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "redraft":  # from redraft import x: x is the module
                found.update(f"redraft.{alias.name}" for alias in node.names)
            elif node.module.split(".")[0] == "redraft":
                found.add(node.module)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_room_of_the_package_has_a_rule() -> None:
    rooms = {room_of(module_name(path)) for path in MODULES}
    assert rooms <= set(ALLOWED), rooms - set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_the_rooms_its_room_may(path: Path) -> None:
    room = room_of(module_name(path))
    imported = {room_of(target) for target in redraft_imports(path)} - {room}
    assert imported <= ALLOWED[room], f"{module_name(path)} ({room}) imports {sorted(imported - ALLOWED[room])}"


def test_the_rule_can_fail() -> None:
    """The checker sees a forbidden import, lazy ones included (so the test above means something)."""
    sample = PACKAGE / "protocols" / "messages.py"
    assert "redraft.errors" in redraft_imports(sample)
    tree_with_lazy = "def f():\n    from redraft.run import run\n"
    names = {n.module for n in ast.walk(ast.parse(tree_with_lazy)) if isinstance(n, ast.ImportFrom) and n.module}
    assert {room_of(m) for m in names} == {"run"} and "run" not in ALLOWED["protocols"]
