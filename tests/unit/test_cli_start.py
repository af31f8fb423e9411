"""A command starts without loading what it does not use: `redraft --help`, `--version`, `trace`, `report` and
`export` never import Ray, the actor system or the engine's loop (their time is measured in
benchmarks/bench_cli_start.py; this asserts the cause of the slowness stays away, not a duration)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import REPO_ROOT

HEAVY = ("ray", "redraft.actors", "redraft.engine.arbiter", "redraft.comparison", "redraft.tuning", "matplotlib")


def loaded_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_command_line_and_the_package_load_nothing_heavy_until_a_command_needs_it() -> None:
    for code in ("import redraft.cli", "import redraft", "import redraft.errors"):
        heavy = {m for m in loaded_after(code) if m.startswith(HEAVY)}
        assert heavy == set(), (code, sorted(heavy)[:10])


def test_the_public_names_still_come_from_the_package_and_are_listed() -> None:
    import redraft

    assert redraft.RunConfig.__module__.startswith("redraft.config")
    assert redraft.refine.__module__.startswith("redraft.engine")
    assert set(redraft.__all__) <= set(dir(redraft))
    loaded = loaded_after("import redraft\nredraft.run")
    assert "redraft.actors" in loaded  # asked for, loaded: the laziness is on import only
