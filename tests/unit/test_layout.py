"""The house's rules, read from the code: each package imports only the rooms below it, Ray is the actor
system's alone, no module or function grows past what a reader holds at once, and nothing probes a scenario.

The rooms (also in docs/architecture.md): ``protocols`` imports nothing of redraft but ``errors``;
``strategies`` builds on ``protocols``; ``engine`` (the loop and the roles, no Ray) on strategies,
scenarios and backends; ``actors`` (the only room that imports Ray) makes the engine's roles actors
and drives a run; ``judging`` (the judge and its card, no Ray) sits beside the engine, below the actors
that run it and the comparisons that gate on it; ``stats``, the pure statistics, imports nothing of redraft;
the views read the run directory and nothing that runs, and the viewer (``redraft view``) serves them, reading
through the run directory's readers and rendering through the views; ``serving`` (``redraft serve``) runs the engine per
request behind an HTTP app, and only its deployment module imports Ray (Ray Serve); telemetry reads it too, and
prices what it reads, for the actor system (a run's spans as it goes) and the CLI (a run's afterwards);
``jsonlines``, the rule every journal is read by, imports nothing of redraft, so the backends, the run
directory and the tune share it; ``plaintext``, the one rule for text no frame can carry, imports nothing of
redraft either, so the rooms where text enters (errors, protocols, sandbox, backends, engine, and the run directory's
judgements) share it; only the CLI
sees everything, and nothing imports the CLI.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "redraft"

ALLOWED: dict[str, set[str]] = {
    "plaintext": set(),
    "errors": {"plaintext"},
    "services": set(),
    "jsonlines": set(),
    "stats": set(),
    "plugins": {"errors"},
    "protocols": {"errors", "plaintext"},
    "config": {"errors", "protocols"},
    "strategies": {"errors", "plugins", "protocols", "services"},
    "sandbox": {"errors", "plaintext"},
    "backends": {"errors", "plugins", "protocols", "services", "jsonlines", "plaintext"},
    "scenarios": {"errors", "plugins", "protocols", "sandbox"},
    "engine": {
        "errors",
        "plugins",
        "protocols",
        "config",
        "services",
        "strategies",
        "backends",
        "scenarios",
        "sandbox",
        "rundir",
        "plaintext",
    },
    "judging": {
        *("errors", "plugins", "protocols", "config", "services", "strategies", "backends", "scenarios", "sandbox"),
        *("engine", "rundir", "views", "stats"),
    },
    "actors": {
        *("errors", "plugins", "protocols", "config", "services", "strategies", "backends", "scenarios", "sandbox"),
        *("engine", "rundir", "telemetry", "judging"),
    },
    "serving": {"errors", "protocols", "config", "strategies", "scenarios", "engine", "rundir", "actors"},
    "rundir": {"errors", "protocols", "jsonlines", "plaintext"},
    "views": {"errors", "protocols", "rundir"},
    "viewer": {"errors", "protocols", "rundir", "views"},
    "telemetry": {"errors", "protocols", "backends", "rundir"},
    "comparison": {
        *("errors", "protocols", "config", "scenarios", "engine", "actors", "rundir", "views", "stats", "judging"),
    },
    "tuning": {
        *("errors", "protocols", "config", "backends", "scenarios", "engine", "actors", "rundir", "views"),
        *("comparison", "jsonlines", "stats", "judging"),
    },
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
        "telemetry",
        "comparison",
        "tuning",
        "judging",
        "serving",
        "viewer",
    },
    "__init__": {"protocols", "config", "engine", "actors", "comparison", "tuning"},
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


def test_every_module_imports_only_the_rooms_its_room_may() -> None:
    wrong = {}
    for path in MODULES:
        room = room_of(module_name(path))
        imported = {room_of(target) for target in redraft_imports(path)} - {room}
        if not imported <= ALLOWED[room]:
            wrong[f"{module_name(path)} ({room})"] = sorted(imported - ALLOWED[room])
    assert wrong == {}


def test_no_module_reaches_into_another_package_s_private_modules() -> None:
    """A package's ``__init__`` is its public face: another room imports what it exports, never ``_private``."""
    reached = []
    for path in MODULES:
        room = room_of(module_name(path))
        for target in redraft_imports(path):
            parts = target.split(".")
            private = any(part.startswith("_") and not part.startswith("__") for part in parts[2:])
            if private and room_of(target) != room:
                reached.append(f"{module_name(path)} imports {target}")
    assert reached == []


NAMES_RESOLVED_IN = {
    "engine/resolution/_run.py",  # a run's config, once (`resolve_run`)
    *("engine/arbiter.py", "engine/drafter.py", "engine/verifier.py", "engine/grader.py"),  # each constructor, once
    "cli/__init__.py",  # `redraft strategies` lists each strategy's documentation
    "cli/_judge.py",  # `redraft judge calibrate`'s --scenario, once, where the command starts
    *("scenarios/_base.py", "strategies/_base.py"),  # the registries themselves
}
"""Where a scenario or a strategy may be looked up by name: everywhere else receives the object."""


def test_a_scenario_or_a_strategy_is_looked_up_by_name_only_where_a_run_is_resolved() -> None:
    lookups = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node.func, "id", None) if isinstance(node, ast.Call) else None
            if name in ("get_scenario", "get_strategy") and str(path.relative_to(PACKAGE)) not in NAMES_RESOLVED_IN:
                lookups.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    assert lookups == []


MADE_ONLY_IN = {
    "load_prices": {
        "engine/resolution/_money.py",  # a run's price table, once (`resolve_money`)
        "engine/resolution/_arbiter.py",  # `arbiter_settings` of a config whose roles are not resolved (tests)
        "judging/judge.py",  # a comparison's or a calibration's verdicts, priced after the runs
        "telemetry/_export.py",  # a finished run's spans, read back from its directory
        "tuning/_costs.py",  # the tune's proposals, priced in its estimate
    },
    "Cast.of": {"engine/resolution/_run.py"},  # a run's cast, once (and anew with its setup)
}
"""Where a price table is read and a run's cast made: every other reader takes the resolved run's."""


def called_names(node: ast.AST) -> str | None:
    """``f`` for a call ``f(...)``, ``A.f`` for ``A.f(...)``; None for any other node."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None


def test_a_price_table_is_read_and_a_cast_made_only_where_a_run_is_resolved() -> None:
    made = []
    for path in MODULES:
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text())):
            name = called_names(node)
            if name in MADE_ONLY_IN and where not in MADE_ONLY_IN[name]:
                made.append(f"{where}:{getattr(node, 'lineno', 0)} {name}")
    assert made == []
    assert called_names(ast.parse("Cast.of(setup, strategy)").body[0].value) == "Cast.of"  # type: ignore[attr-defined]


def test_the_rule_can_fail() -> None:
    """The checker sees a forbidden import, lazy ones included (so the test above means something)."""
    sample = PACKAGE / "protocols" / "messages.py"
    assert "redraft.errors" in redraft_imports(sample)
    tree_with_lazy = "def f():\n    from redraft.actors import run\n"
    names = {n.module for n in ast.walk(ast.parse(tree_with_lazy)) if isinstance(n, ast.ImportFrom) and n.module}
    assert {room_of(m) for m in names} == {"actors"} and "actors" not in ALLOWED["protocols"]


def imports_of(path: Path) -> set[str]:
    """Every top-level package ``path`` imports, at any depth."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


SERVE_ON_RAY = PACKAGE / "serving" / "_deployment.py"
"""The served app's one module on Ray (Ray Serve's deployment and metrics): the app itself has no Ray."""


def test_only_the_actor_system_imports_ray() -> None:
    on_ray = [p for p in MODULES if "ray" in imports_of(p) and p.parts[-2] != "actors"]
    outside = [str(p.relative_to(PACKAGE)) for p in on_ray if p != SERVE_ON_RAY]
    assert outside == []
    assert any("ray" in imports_of(p) for p in (PACKAGE / "actors").glob("*.py"))  # the check sees an import


MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50


def test_no_module_is_longer_than_a_reader_holds() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n for p in MODULES if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


MAX_MODULE_DOCSTRING_CHARS = 1600
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
SECTION_LINK = re.compile(r'docs/architecture\.md,\s+section\s+"([^"]+)"')


def test_a_module_docstring_states_its_invariant_and_leaves_the_essay_to_the_architecture_page() -> None:
    """A module's docstring is read in one sitting (about 1,500 characters: what it keeps, not why at length); the
    reasons live in docs/architecture.md, in the section the docstring names, which must exist."""
    long = {}
    for path in MODULES:
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if len(docstring) > MAX_MODULE_DOCSTRING_CHARS:
            long[str(path.relative_to(PACKAGE))] = len(docstring)
    assert long == {}
    headings = set(re.findall(r"^#+ (.+)$", ARCHITECTURE.read_text(), re.MULTILINE))
    named = {
        (str(path.relative_to(PACKAGE)), section)
        for path in MODULES
        for section in SECTION_LINK.findall(ast.get_docstring(ast.parse(path.read_text())) or "")
    }
    assert named and {(module, section) for module, section in named if section not in headings} == set()


def code_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines, its docstring left out (a docstring's example is documentation, not code to hold)."""
    lines = (function.end_lineno or function.lineno) - function.lineno + 1
    first = function.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines -= (first.end_lineno or first.lineno) - first.lineno + 1
    return lines


def test_no_function_is_longer_than_a_reader_holds() -> None:
    long = {}
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = code_lines(node)
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.name}"] = lines
    assert long == {}


def test_nothing_probes_a_scenario_or_a_strategy_for_what_its_contract_declares() -> None:
    """The scenario and strategy contracts (ABCs) declare every capability with a default: nobody asks
    ``getattr(s, "stages")`` or ``getattr(strategy, "shares_batch", False)``."""
    from redraft.scenarios import Scenario
    from redraft.strategies import Strategy

    declared = {name for cls in (Scenario, Strategy) for name in dir(cls) if not name.startswith("__")}
    probes = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            probe = isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr")
            named = probe and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            if named and node.args[1].value in declared:
                probes.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.args[1].value}")
    assert probes == []
