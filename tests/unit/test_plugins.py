"""Third-party plugins: a package's strategies and scenarios are found through its entry points.

The plugin is a real (tiny) installed distribution: a module and a ``.dist-info``
with ``entry_points.txt`` on ``PYTHONPATH``, which is all ``importlib.metadata``
needs; the real `redraft` command runs in a subprocess and must list it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

PLUGIN = '''
from redraft.strategies import RoundOutcome, Strategy, sample_and_verify, strategy
from redraft.scenarios.builtin.arithmetic import Arithmetic
from redraft.scenarios import scenario


@strategy("plugin_twice")
class Twice(Strategy):
    """Two samples, whatever --samples says (from a plugin)."""

    revises = False

    async def run_round(self, ctx):
        return RoundOutcome(await sample_and_verify(ctx, 2))


@scenario("plugin_sums")
class Sums(Arithmetic):
    """Arithmetic, shipped by a plugin."""

    name = "plugin_sums"
'''

ENTRY_POINTS = """[redraft.strategies]
demo = redraft_demo_plugin

[redraft.scenarios]
demo = redraft_demo_plugin
broken = redraft_demo_missing_module
"""


def install_plugin(root: Path) -> Path:
    (root / "redraft_demo_plugin.py").write_text(PLUGIN)
    info = root / "redraft_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: redraft-demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


def redraft(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "redraft.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_packages_strategy_and_scenario_are_listed_and_a_broken_one_is_named(tmp_path: Path) -> None:
    root = install_plugin(tmp_path)
    strategies = redraft(root, "strategies")
    assert strategies.returncode == 0, strategies.stderr
    names = strategies.stdout.split("\n\n")[0].splitlines()
    assert "plugin_twice" in names and "adversarial" in names  # beside the built-ins, not instead
    assert "Two samples, whatever --samples says (from a plugin)." in strategies.stdout
    scenarios = redraft(root, "scenarios")
    assert scenarios.returncode == 0
    assert {"plugin_sums", "arithmetic"} <= set(scenarios.stdout.split())
    # One broken plugin is reported by name and does not take the others down.
    assert "redraft plugin 'broken' (redraft_demo_missing_module) failed to load" in scenarios.stderr


def test_a_plugin_strategy_runs_a_task(tmp_path: Path) -> None:
    root = install_plugin(tmp_path)
    script = (
        "import asyncio, itertools\n"
        "from redraft import RunConfig, refine\n"
        "from redraft.backends.scripted import ScriptedSpec\n"
        "from redraft.scenarios import get_scenario\n"
        "task = next(iter(get_scenario('plugin_sums').tasks(seed=0)))\n"
        "spec = ScriptedSpec(script=lambda r: 'Answer: 1')\n"
        "roles = {'drafter': spec, 'critic': spec}\n"
        "done = refine(task, RunConfig.build(strategy='plugin_twice', samples=5), backends=roles)\n"
        "print(sum(type(m).__name__ == 'Draft' for m in done.trace), done.result.scenario)\n"
    )
    env = os.environ | {"PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "plugin_sums"]  # the plugin's own round: two drafts, not five


def test_a_name_is_registered_once_and_the_decorator_names_the_class() -> None:
    import pytest

    from redraft.errors import UserError
    from redraft.plugins import Registry

    registry: Registry[type] = Registry("widget", "redraft.test-widgets-none")

    @registry.register("gear")
    class Gear:
        pass

    assert Gear.name == "gear"  # type: ignore[attr-defined]
    registry.register("gear")(Gear)  # the same class again (its module imported twice): harmless
    assert registry.get("gear") is Gear

    class Impostor:
        pass

    with pytest.raises(UserError, match=r"widget 'gear' is registered twice: by .*Gear and by .*Impostor"):
        registry.register("gear")(Impostor)
    assert registry.get("gear") is Gear  # the first stays


def test_threads_that_read_a_registry_at_once_all_see_it_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from redraft import plugins

    registry: plugins.Registry[int] = plugins.Registry("widget", "redraft.test-widgets")

    class SlowEntry:
        name, value = "slow", "tests:slow"

        def load(self) -> None:
            time.sleep(0.2)  # a slow import: the other threads arrive while it runs
            registry.register("slow")(1)

    monkeypatch.setattr(plugins, "entry_points", lambda group: [SlowEntry()] if group == registry.group else [])
    seen: list[list[str]] = []
    threads = [threading.Thread(target=lambda: seen.append(registry.names())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [["slow"]] * 4


def test_a_near_miss_name_gets_the_nearest_known_one_suggested() -> None:
    import pytest

    from redraft.errors import UserError
    from redraft.plugins import Registry

    registry: Registry[int] = Registry("widget", "redraft.test-widgets-none")
    registry.register("self_refine")(1)
    registry.register("adversarial")(2)
    with pytest.raises(UserError) as near:
        registry.get("self-refine")
    assert (
        str(near.value) == "unknown widget 'self-refine' (did you mean 'self_refine'? known: adversarial, self_refine)"
    )
    with pytest.raises(UserError) as far:
        registry.get("zzz")
    assert str(far.value) == "unknown widget 'zzz' (known: adversarial, self_refine)"  # nothing near: no guess
